#!/bin/sh
# Copy one model's weights from S3 to the node's NVMe-backed cache, once, and verify the copy.
#
# Usage: fetch_weights.sh BUCKET PREFIX TARGET   (the model server's init container runs it as
# `/bin/sh -c <this file> fetch-weights BUCKET PREFIX TARGET`, so values never pass through quoting)
#
# The listing (key and size of every object under PREFIX) is the manifest: TARGET is warm only if
# its marker file holds the same listing, and a fresh copy is accepted only if every listed file
# exists locally with the listed size. Calls go to the bucket's own region (asked from S3, not
# assumed from the pod's); folder markers (zero-byte keys ending in "/") are not files and are left
# out; keys may contain spaces (the listing is split on tabs only).
set -eu
[ "$#" -eq 3 ] || { echo "usage: fetch_weights.sh BUCKET PREFIX TARGET" >&2; exit 2; }
bucket=$1
prefix=$2
dst=$3
marker=.llm-platform-complete
tab=$(printf '\t')
mkdir -p "$dst"
region=$(aws s3api get-bucket-location --bucket "$bucket" --query LocationConstraint --output text)
case "$region" in ""|None|null) region=us-east-1 ;; EU) region=eu-west-1 ;; esac
export AWS_REGION="$region" AWS_DEFAULT_REGION="$region"
manifest=$(aws s3api list-objects-v2 --bucket "$bucket" --prefix "$prefix" --region "$region" \
  --query 'Contents[].[Key,Size]' --output text \
  | awk -F '\t' -v p="$prefix" 'NF == 2 && substr($1, length($1)) != "/" && index($1, p) == 1 { print substr($1, length(p) + 1) "\t" $2 }' \
  | LC_ALL=C sort)
[ -n "$manifest" ] || { echo "no objects under s3://$bucket/$prefix" >&2; exit 1; }
if [ -f "$dst/$marker" ] && [ "$(cat "$dst/$marker")" = "$manifest" ]; then
  echo "cache warm: $dst matches s3://$bucket/$prefix"; exit 0
fi
rm -f "$dst/$marker"
aws s3 sync "s3://$bucket/$prefix" "$dst" --region "$region" --only-show-errors --no-progress
printf '%s\n' "$manifest" | while IFS="$tab" read -r key size; do
  actual=$(stat -c %s "$dst/$key" 2>/dev/null || echo missing)
  [ "$actual" = "$size" ] || { echo "incomplete copy: $key is $actual, expected $size bytes" >&2; exit 1; }
done
printf '%s\n' "$manifest" > "$dst/$marker"
echo "copied and verified $(printf '%s\n' "$manifest" | wc -l) objects from s3://$bucket/$prefix ($region)"
