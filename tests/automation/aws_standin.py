"""A recording stand-in for the ``aws`` CLI: the calls preflight makes, logged with ``"tool": "aws"``.

``STANDIN_AWS`` picks the account's condition:
  ok (default)       credentials valid, buckets and KMS keys exist
  no-credentials     sts fails as with expired or missing credentials
  no-key             kms describe-key fails (the key does not exist or is not allowed)
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import time


def main(argv: list[str]) -> int:
    with open(os.environ["STANDIN_LOG"], "a") as log:
        fcntl.flock(log, fcntl.LOCK_EX)
        log.write(json.dumps({"tool": "aws", "argv": argv, "time": time.time()}) + "\n")
    mode = os.environ.get("STANDIN_AWS", "ok")
    if argv[:1] == ["--version"]:
        print("aws-cli/2.31.0 Python/3.13.7 Linux/6.8 exe/x86_64")
        return 0
    if argv[:2] == ["sts", "get-caller-identity"]:
        if mode == "no-credentials":
            print("\nUnable to locate credentials. You can configure credentials by running \"aws configure\".",
                  file=sys.stderr)
            return 253
        print(json.dumps({"UserId": "AIDAEXAMPLE", "Account": "123456789012",
                          "Arn": "arn:aws:sts::123456789012:assumed-role/platform/alice"}))
        return 0
    if argv[:2] == ["s3api", "head-bucket"]:
        return 0
    if argv[:2] == ["kms", "describe-key"]:
        if mode == "no-key":
            print("\nAn error occurred (NotFoundException) when calling the DescribeKey operation: Alias "
                  "arn:aws:kms:us-east-1:123456789012:alias/llm-platform is not found.", file=sys.stderr)
            return 254
        print(json.dumps({"KeyMetadata": {"KeyId": "1234abcd", "Enabled": True}}))
        return 0
    print(f"the aws stand-in does not answer {' '.join(argv)}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
