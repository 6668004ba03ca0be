"""A recording stand-in for the ``aws`` CLI: the calls preflight makes, logged with ``"tool": "aws"``.

``STANDIN_AWS`` picks the account's condition:
  ok (default)       credentials valid, buckets and KMS keys exist
  no-credentials     sts fails as with expired or missing credentials
  no-key             kms describe-key fails (the key does not exist or is not allowed)
  bedrock-unsubscribed   a fresh account: invoking a third-party (non-Amazon) Bedrock model fails with
                     the AccessDeniedException Bedrock returns while its Marketplace subscription is missing
  bedrock-no-use-case    Anthropic's use-case form was never submitted: Anthropic models fail
  pricing-denied     pricing get-products fails with AccessDeniedException (no pricing:GetProducts)
``STANDIN_NODEGROUPS`` is a JSON list of the cluster's managed node groups for ``eks list-nodegroups`` and
``eks describe-nodegroup``, each ``{"name", "capacityType", "version", "desiredSize"}`` (default: one Spot
group ``inference`` at 1.34, desired 0), answered in the EKS API's DescribeNodegroup shape.
``iam simulate-principal-policy`` evaluates the role's policies from ``STANDIN_IAM_POLICIES`` (a JSON map of
role ARN to a list of policy documents; unset: every role may do everything), plus any ``--policy-input-list``
document, by IAM's evaluation logic (IAM user guide, "Policy evaluation logic"): an explicit Deny wins, else an
Allow, else implicitDeny; actions match case-insensitively, resources case-sensitively, ``*`` and ``?`` as
wildcards; a statement with a Condition does not apply (the simulation is given no context keys).
Bedrock answers are recorded from the service's documented responses (Converse; InvokeModel writes
the body to the outfile, the last argument).

``ec2 describe-instance-types`` and ``pricing get-products`` answer from recorded responses in
``STANDIN_AWS_RESPONSES`` (tests/automation/responses/aws): ``ec2-describe-instance-types.<region>.json``
(DescribeInstanceTypes output) narrowed by ``--filters Name=instance-type,Values=...`` wildcards, and
``pricing-get-products.json`` (GetProducts output: PriceList of JSON strings) narrowed by every
``Type=TERM_MATCH,Field=F,Value=V`` filter, as the service matches product attributes.
``STANDIN_AWS_RAW_EC2`` / ``STANDIN_AWS_RAW_PRICING``: a file whose bytes are answered as they are instead
(a hostile or broken answer: not JSON, not UTF-8, nested past any parser, wrong shapes).
``eks describe-addon-versions`` answers from ``eks-describe-addon-versions.json`` narrowed to
``--addon-name`` and to builds whose ``compatibilities`` list ``--kubernetes-version``, as the service
does; ``ssm get-parameter`` from ``ssm-parameters.json`` (name -> Parameter), ParameterNotFound
otherwise. Their versions and dates are stand-in figures in the real shapes, not AWS's.
"""

from __future__ import annotations

import fcntl
import fnmatch
import json
import os
import sys
import time
from pathlib import Path


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
    if argv[:2] in (["bedrock-runtime", "converse"], ["bedrock-runtime", "invoke-model"]):
        return bedrock(argv, mode)
    if argv[:2] in (["ec2", "describe-instance-types"], ["pricing", "get-products"]):
        if mode == "no-credentials":
            print("\nUnable to locate credentials. You can configure credentials by running \"aws configure\".",
                  file=sys.stderr)
            return 253
        raw = os.environ.get("STANDIN_AWS_RAW_EC2" if argv[0] == "ec2" else "STANDIN_AWS_RAW_PRICING")
        if raw:
            sys.stdout.buffer.write(Path(raw).read_bytes())
            return 0
        if argv[0] == "ec2":
            return describe_instance_types(argv)
        if mode == "pricing-denied":
            print("\nAn error occurred (AccessDeniedException) when calling the GetProducts operation: User: "
                  "arn:aws:sts::123456789012:assumed-role/platform/alice is not authorized to perform: "
                  "pricing:GetProducts because no identity-based policy allows the pricing:GetProducts action",
                  file=sys.stderr)
            return 254
        return get_products(argv)
    if argv[:2] == ["eks", "describe-addon-versions"]:
        return describe_addon_versions(argv, mode)
    if argv[:2] == ["ssm", "get-parameter"]:
        return get_parameter(argv, mode)
    if argv[:2] in (["eks", "list-nodegroups"], ["eks", "describe-nodegroup"]):
        return nodegroups(argv)
    if argv[:2] == ["iam", "simulate-principal-policy"]:
        return simulate_principal_policy(argv)
    if argv[:2] == ["kms", "describe-key"]:
        if mode == "no-key":
            print("\nAn error occurred (NotFoundException) when calling the DescribeKey operation: Alias "
                  "arn:aws:kms:us-east-1:123456789012:alias/llm-platform is not found.", file=sys.stderr)
            return 254
        print(json.dumps({"KeyMetadata": {"KeyId": "1234abcd", "Enabled": True}}))
        return 0
    print(f"the aws stand-in does not answer {' '.join(argv)}", file=sys.stderr)
    return 2


#: What Bedrock answers a fresh account's first call to a third-party model (the caller could not
#: subscribe it to the model's AWS Marketplace offer).
MARKETPLACE_DENIED = (
    "\nAn error occurred (AccessDeniedException) when calling the {operation} operation: Model access is denied "
    "due to IAM user or service role is not authorized to perform the required AWS Marketplace actions "
    "(aws-marketplace:ViewSubscriptions, aws-marketplace:Subscribe) to enable access to this model. Refer to the "
    "Amazon Bedrock documentation for further details. Your AWS Marketplace subscription for this model cannot be "
    "completed at this time. If you recently fixed this issue, try again after 15 minutes."
)
USE_CASE_MISSING = (
    "\nAn error occurred (ResourceNotFoundException) when calling the {operation} operation: Model use case "
    "details have not been submitted for this account. Fill out the Anthropic use case details form before using "
    "the model. If you have already filled out the form, try again in 15 minutes."
)


def bedrock(argv: list[str], mode: str) -> int:
    model_id = argv[argv.index("--model-id") + 1]
    provider = model_id.split(".")[1] if model_id.split(".")[0] in ("us", "eu", "apac", "global") else model_id.split(".")[0]
    operation = "Converse" if argv[1] == "converse" else "InvokeModel"
    if mode == "bedrock-unsubscribed" and provider != "amazon":
        print(MARKETPLACE_DENIED.format(operation=operation), file=sys.stderr)
        return 254
    if mode == "bedrock-no-use-case" and provider == "anthropic":
        print(USE_CASE_MISSING.format(operation=operation), file=sys.stderr)
        return 254
    if operation == "Converse":
        print(json.dumps({"output": {"message": {"role": "assistant", "content": [{"text": "Ready"}]}},
                          "stopReason": "max_tokens", "usage": {"inputTokens": 8, "outputTokens": 1, "totalTokens": 9},
                          "metrics": {"latencyMs": 412}}))
        return 0
    with open(argv[-1], "w") as out:
        out.write(json.dumps({"embedding": [0.01, -0.02, 0.03], "inputTextTokenCount": 1}))
    print(json.dumps({"contentType": "application/json"}))
    return 0


def nodegroups(argv: list[str]) -> int:
    groups = json.loads(os.environ.get("STANDIN_NODEGROUPS") or json.dumps(
        [{"name": "inference", "capacityType": "SPOT", "version": "1.34", "desiredSize": 0}]))
    cluster = _after(argv, "--cluster-name")[0]
    if argv[1] == "list-nodegroups":
        print(json.dumps({"nodegroups": [g["name"] for g in groups]}))
        return 0
    name = _after(argv, "--nodegroup-name")[0]
    group = next((g for g in groups if g["name"] == name), None)
    if group is None:
        print(f"\nAn error occurred (ResourceNotFoundException) when calling the DescribeNodegroup operation: "
              f"No node group found for name: {name}.", file=sys.stderr)
        return 254
    print(json.dumps({"nodegroup": {
        "nodegroupName": name, "clusterName": cluster, "version": group["version"], "status": "ACTIVE",
        "capacityType": group["capacityType"],
        "scalingConfig": {"minSize": 0, "maxSize": max(1, group["desiredSize"]), "desiredSize": group["desiredSize"]},
    }}))
    return 0


def _matches(patterns, value: str, *, fold: bool) -> bool:
    patterns = [patterns] if isinstance(patterns, str) else list(patterns or [])
    if fold:
        return any(fnmatch.fnmatchcase(value.lower(), p.lower()) for p in patterns)
    return any(fnmatch.fnmatchcase(value, p) for p in patterns)


def _applies(statement: dict, action: str, resource: str) -> bool:
    if statement.get("Condition"):
        return False
    if "Action" in statement and not _matches(statement["Action"], action, fold=True):
        return False
    if "NotAction" in statement and _matches(statement["NotAction"], action, fold=True):
        return False
    if "Resource" in statement and not _matches(statement["Resource"], resource, fold=False):
        return False
    return not ("NotResource" in statement and _matches(statement["NotResource"], resource, fold=False))


def simulate_principal_policy(argv: list[str]) -> int:
    role = _after(argv, "--policy-source-arn")[0]
    known = json.loads(os.environ.get("STANDIN_IAM_POLICIES") or "null")
    documents = ([{"Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}] if known is None
                 else [d if isinstance(d, dict) else json.loads(d) for d in known.get(role, [])])
    if known is not None and role not in known:
        print(f"\nAn error occurred (NoSuchEntity) when calling the SimulatePrincipalPolicy operation: The role "
              f"with name {role.rsplit('/', 1)[-1]} cannot be found.", file=sys.stderr)
        return 254
    documents += [json.loads(d) for d in _after(argv, "--policy-input-list")]
    statements = [st for d in documents for st in ([d["Statement"]] if isinstance(d["Statement"], dict)
                                                   else d["Statement"])]
    results = []
    for action in _after(argv, "--action-names"):
        for resource in _after(argv, "--resource-arns"):
            applying = [st for st in statements if _applies(st, action, resource)]
            decision = ("explicitDeny" if any(st["Effect"] == "Deny" for st in applying)
                        else "allowed" if applying else "implicitDeny")
            results.append({"EvalActionName": action, "EvalResourceName": resource, "EvalDecision": decision,
                            "MatchedStatements": [], "MissingContextValues": []})
    print(json.dumps({"EvaluationResults": results, "IsTruncated": False}))
    return 0


def _after(argv: list[str], flag: str) -> list[str]:
    """The values after ``flag`` up to the next ``--option``."""
    if flag not in argv:
        return []
    rest = argv[argv.index(flag) + 1:]
    return rest[:next((i for i, a in enumerate(rest) if a.startswith("--")), len(rest))]


def describe_instance_types(argv: list[str]) -> int:
    region = _after(argv, "--region")[0]
    recorded = Path(os.environ["STANDIN_AWS_RESPONSES"]) / f"ec2-describe-instance-types.{region}.json"
    items = json.loads(recorded.read_text())["InstanceTypes"] if recorded.exists() else []
    patterns = [v for f in _after(argv, "--filters") if f.startswith("Name=instance-type,Values=")
                for v in f.split("Values=", 1)[1].split(",")]
    print(json.dumps({"InstanceTypes": [i for i in items
                                        if not patterns or any(fnmatch.fnmatch(i["InstanceType"], p) for p in patterns)]}))
    return 0


def get_products(argv: list[str]) -> int:
    recorded = json.loads((Path(os.environ["STANDIN_AWS_RESPONSES"]) / "pricing-get-products.json").read_text())
    terms = [dict(part.split("=", 1) for part in f.split(",", 2)) for f in _after(argv, "--filters")]
    matched = [text for text in recorded["PriceList"]
               if all(json.loads(text)["product"]["attributes"].get(t["Field"]) == t["Value"]
                      for t in terms if t.get("Type") == "TERM_MATCH")]
    print(json.dumps({"FormatVersion": recorded["FormatVersion"], "PriceList": matched}))
    return 0


def describe_addon_versions(argv: list[str], mode: str) -> int:
    if mode == "no-credentials":
        print("\nUnable to locate credentials. You can configure credentials by running \"aws configure\".",
              file=sys.stderr)
        return 253
    if mode == "garbage":
        print("<html><body>Service Unavailable</body></html>")
        return 0
    if mode == "deep":
        print("[" * 5000 + "]" * 5000)
        return 0
    if mode == "slow":
        time.sleep(30)
    recorded = json.loads((Path(os.environ["STANDIN_AWS_RESPONSES"]) / "eks-describe-addon-versions.json").read_text())
    name, minor = _after(argv, "--addon-name")[0], _after(argv, "--kubernetes-version")[0]
    addons = []
    for addon in recorded["addons"]:
        if addon["addonName"] == name:
            builds = [b for b in addon["addonVersions"] if any(c["clusterVersion"] == minor for c in b["compatibilities"])]
            addons.append({**addon, "addonVersions": builds})
    print(json.dumps({"addons": addons}))
    return 0


def get_parameter(argv: list[str], mode: str) -> int:
    name = _after(argv, "--name")[0]
    recorded = json.loads((Path(os.environ["STANDIN_AWS_RESPONSES"]) / "ssm-parameters.json").read_text())
    if name not in recorded:
        print("\nAn error occurred (ParameterNotFound) when calling the GetParameter operation: ", file=sys.stderr)
        return 254
    print(json.dumps({"Parameter": recorded[name]}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
