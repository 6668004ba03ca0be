"""``versions outdated`` against sources on 127.0.0.1: a Helm repository (http.server serving an
``index.yaml``), a real OCI registry (Debian's ``docker-registry``, tags pushed through its API) and
the aws stand-in (recorded ``describe-addon-versions`` and SSM answers). Hostile answers (garbage,
huge, dripping, redirect loops, deep nesting) each end in one line and exit 1.

Expected versions are literals from the answers these tests serve, never from the code under test.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from automation import exit_codes
from automation.cli import main
from automation.outdated.order import admits, eks_version, newest
from tests.automation.test_images import DOCKER_MANIFEST, push_single
from tests.support.needs import missing
from tests.support.registry import Pusher, registry_binary, running_registry, serve

ROOT = Path(__file__).resolve().parents[2]
RESPONSES = Path(__file__).resolve().parent / "responses" / "aws"

VERSIONS = '''"""A versions file for the outdated check's tests."""
from components.versions import EksAddons, HelmChart, Image

DEFAULT_KUBERNETES_VERSION = "1.35"
SUPPORTED_KUBERNETES_VERSIONS = ("1.35", "1.36")
KEDA = HelmChart(chart="keda", version="2.20.2", repository="https://kedacore.github.io/charts")
KARPENTER = HelmChart(chart="karpenter", version="1.14.1", repository="oci://public.ecr.aws/karpenter")
VLLM_IMAGE = Image(repository="vllm/vllm-openai", tag="v0.33.0")
NODE_EXPORTER_IMAGE = Image(repository="quay.io/prometheus/node-exporter", tag="v1.12.1-distroless")
CLUSTER_AUTOSCALER_IMAGE_1_35 = Image(repository="registry.k8s.io/autoscaling/cluster-autoscaler", tag="v1.35.2")
CLUSTER_AUTOSCALER_IMAGES = {"1.35": CLUSTER_AUTOSCALER_IMAGE_1_35}
EKS_ADDONS = {
    "1.35": EksAddons(coredns="v1.14.3-eksbuild.3", kube_proxy="v1.35.3-eksbuild.18", vpc_cni="v1.23.0-eksbuild.1",
                      ebs_csi_driver="v1.63.1-eksbuild.1", pod_identity_agent="v1.3.10-eksbuild.3"),
}
KARPENTER_AMI_ALIAS = "al2023@v20260818"
'''

INDEX = """apiVersion: v1
entries:
  keda:
  - version: 2.22.0-rc1
    created: "2026-11-20T09:00:00Z"
    kubeVersion: ">=1.31.0-0"
  - version: 2.21.0
    created: "2026-10-01T12:30:00.123456Z"
    kubeVersion: ">=1.30.0-0"
  - version: 2.20.2
    created: "2026-07-01T08:00:00Z"
  other:
  - version: 9.9.9
generated: "2026-11-20T09:00:00Z"
"""


@pytest.fixture
def versions_file(tmp_path: Path) -> Path:
    path = tmp_path / "versions.py"
    path.write_text(VERSIONS)
    return path


def outdated(capsys, versions_file: Path, *extra: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["versions", "outdated", "--versions-file", str(versions_file), *extra])
    out, err = capsys.readouterr()
    return code, out, err


def handler(status: int = 200, body: bytes = b"", headers: dict[str, str] | None = None):
    class Answer(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server hook
            self.send_response(status)
            for key, value in (headers or {}).items():
                self.send_header(key, value.replace("{path}", self.path))
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_args):
            pass

    return Answer


def helm_repo(index: str | bytes):
    return serve(handler(200, index.encode() if isinstance(index, str) else index, {"Content-Type": "text/yaml"}))


# --- the rules ------------------------------------------------------------------------------------


def test_helm_refuses_a_constraint_without_a_prerelease_on_eks():
    """Textbook semver: v1.35.0 >= 1.25.0. Helm's engine (Masterminds/semver v3 ``constraints.go``) sees
    EKS's ``v1.35.2-eks-3cfe0ce``, a pre-release, and a term without a pre-release refuses it."""
    assert admits(">=1.25.0", "v1.35.0") is True
    assert admits(">=1.25.0", eks_version("1.35")) is False
    assert admits(">=1.25.0-0", eks_version("1.35")) is True
    assert admits(">= 1.16.0-0", eks_version("1.36")) is True
    assert admits(">=1.23.0-0 <1.35.0-0", eks_version("1.35")) is False
    assert admits(">=1.23.0-0, <1.36.0-0", eks_version("1.35")) is True
    assert admits("<1.20.0-0 || >=1.34.0-0", eks_version("1.35")) is True


def test_newest_keeps_the_pinned_shape_and_compares_numbers():
    tags = ["v1.9.0", "v1.10.0", "v1.11.0-rc.1", "latest", "v1.10.0-distroless", "sha-abc123", "1.12.0"]
    assert newest("v1.9.0", tags) == "v1.10.0"
    assert newest("v1.9.0-distroless", tags) == "v1.10.0-distroless"
    assert newest("v1.35.2", ["v1.35.2", "v1.35.4", "v1.36.1"], fixed=2) == "v1.35.4"


# --- a Helm repository ----------------------------------------------------------------------------


def test_a_chart_behind_its_index(capsys, versions_file):
    with helm_repo(INDEX) as url:
        code, out, err = outdated(capsys, versions_file, "--only", "KEDA",
                                  "--source-override", f"kedacore.github.io={url}")
    assert code == exit_codes.OUTDATED == 7, err
    assert out.splitlines() == [
        "behind   KEDA  2.20.2 -> 2.21.0 released 2026-10-01; Kubernetes 1.35: yes (kubeVersion '>=1.30.0-0' "
        "(Helm's check on EKS))",
        "1 of 1 pin(s) behind (charts and images judged on Kubernetes 1.35)",
    ]


def test_json_names_the_newest_and_whether_eks_takes_it(capsys, versions_file):
    index = INDEX.replace('kubeVersion: ">=1.30.0-0"', 'kubeVersion: ">=1.30.0"')
    with helm_repo(index) as url:
        code, out, _ = outdated(capsys, versions_file, "--only", "KEDA", "--json", "--kubernetes-version", "1.36",
                                "--source-override", f"kedacore.github.io={url}")
    assert code == exit_codes.OUTDATED
    assert json.loads(out) == {"kubernetesVersion": "1.36", "region": "us-east-1", "pins": [{
        "name": "KEDA", "kind": "chart", "source": "https://kedacore.github.io/charts/index.yaml", "pinned": "2.20.2",
        "newest": "2.21.0", "released": "2026-10-01", "kubernetesVersion": "1.36", "supportsKubernetes": False,
        "supportBasis": "kubeVersion '>=1.30.0' (Helm's check on EKS)", "status": "behind", "error": None}]}


def test_a_current_chart_exits_0(capsys, versions_file):
    current = VERSIONS.replace('version="2.20.2"', 'version="2.21.0"')
    versions_file.write_text(current)
    with helm_repo(INDEX) as url:
        code, out, _ = outdated(capsys, versions_file, "--only", "KEDA", "--source-override", f"kedacore.github.io={url}")
    assert code == exit_codes.OK
    assert out.splitlines()[0] == "current  KEDA  2.21.0"


# --- an OCI registry ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def registry(tmp_path_factory) -> str:
    binary = registry_binary()
    if binary is None:
        missing("docker-registry is not installed (apt-get install docker-registry; see .ci/run)")
    with running_registry(binary, tmp_path_factory.mktemp("outdated-registry")) as url:
        pusher = Pusher(url)
        for name, tags in {
            "karpenter/karpenter": ["1.14.1", "1.15.0", "1.15.1-rc.1", "1.9.0"],
            "vllm/vllm-openai": ["v0.33.0", "v0.34.1", "latest", "nightly"],
            "prometheus/node-exporter": ["v1.12.1-distroless", "v1.13.0", "v1.12.2-distroless"],
            "autoscaling/cluster-autoscaler": ["v1.35.2", "v1.35.4", "v1.36.1"],
        }.items():
            for tag in tags:
                push_single(pusher, name, tag, DOCKER_MANIFEST)
        yield url


def test_charts_and_images_behind_their_tag_lists(capsys, versions_file, registry):
    code, out, err = outdated(capsys, versions_file, "--only", "KARPENTER", "--only", "VLLM_IMAGE",
                              "--only", "NODE_EXPORTER_IMAGE", "--only", "CLUSTER_AUTOSCALER_IMAGE_1_35",
                              *[arg for host in ("public.ecr.aws", "docker.io", "quay.io", "registry.k8s.io")
                                for arg in ("--source-override", f"{host}={registry}")])
    assert code == exit_codes.OUTDATED, err
    unknown = "Kubernetes 1.35: unknown (a tag list says nothing about Kubernetes versions)"
    assert out.splitlines() == [
        f"behind   KARPENTER                      1.14.1 -> 1.15.0; {unknown}",
        f"behind   VLLM_IMAGE                     v0.33.0 -> v0.34.1; {unknown}",
        f"behind   NODE_EXPORTER_IMAGE            v1.12.1-distroless -> v1.12.2-distroless; {unknown}",
        "behind   CLUSTER_AUTOSCALER_IMAGE_1_35  v1.35.2 -> v1.35.4; Kubernetes 1.35: yes (the release made for "
        "Kubernetes 1.35)",
        "4 of 4 pin(s) behind (charts and images judged on Kubernetes 1.35)",
    ]


def test_a_repository_the_registry_does_not_have(capsys, versions_file, registry):
    code, _, err = outdated(capsys, versions_file, "--only", "VLLM_IMAGE", "--source-override", f"docker.io={registry}",
                            "--only", "KARPENTER", "--source-override", f"public.ecr.aws={registry}")
    assert code == exit_codes.OUTDATED  # both exist
    versions_file.write_text(VERSIONS.replace("vllm/vllm-openai", "vllm/gone"))
    code, out, err = outdated(capsys, versions_file, "--only", "VLLM_IMAGE", "--source-override", f"docker.io={registry}")
    assert code == exit_codes.FAILED
    assert err.splitlines() == ["error: VLLM_IMAGE: vllm/gone (tags): 404 from registry-1.docker.io: no repository "
                                "'vllm/gone'"]


# --- the aws CLI ----------------------------------------------------------------------------------


def test_addons_and_the_ami_release_from_the_aws_cli(rig, versions_file, monkeypatch):
    monkeypatch.setenv("STANDIN_AWS_RESPONSES", str(RESPONSES))
    result = rig.run("versions", "outdated", "--versions-file", str(versions_file), "--only", "EKS_ADDONS[1.35].*",
                     "--only", "KARPENTER_AMI_ALIAS[1.35]", "--only", "KARPENTER_AMI_ALIAS[1.36]", "--region",
                     "eu-west-1")
    assert result.code == exit_codes.FAILED  # the stand-in has no ebs-csi or pod-identity builds
    assert result.out.splitlines() == [
        "current  EKS_ADDONS[1.35].coredns     v1.14.3-eksbuild.3",
        "behind   EKS_ADDONS[1.35].kube_proxy  v1.35.3-eksbuild.18 -> v1.35.4-eksbuild.2; Kubernetes 1.35: yes (EKS "
        "lists it as compatible with 1.35)",
        "behind   EKS_ADDONS[1.35].vpc_cni     v1.23.0-eksbuild.1 -> v1.23.1-eksbuild.2; Kubernetes 1.35: yes (EKS "
        "lists it as compatible with 1.35)",
        "behind   KARPENTER_AMI_ALIAS[1.35]    v20260818 -> v20261104 released 2026-11-06; Kubernetes 1.35: yes (the "
        "EKS AMI release for Kubernetes 1.35)",
        "current  KARPENTER_AMI_ALIAS[1.36]    v20260818",
        "3 of 5 pin(s) behind (charts and images judged on Kubernetes 1.35)",
    ]
    assert result.err.splitlines() == [
        "error: EKS_ADDONS[1.35].ebs_csi_driver: aws eks describe-addon-versions --addon-name aws-ebs-csi-driver "
        "--kubernetes-version 1.35: EKS lists no aws-ebs-csi-driver build for Kubernetes 1.35",
        "error: EKS_ADDONS[1.35].pod_identity_agent: aws eks describe-addon-versions --addon-name "
        "eks-pod-identity-agent --kubernetes-version 1.35: EKS lists no eks-pod-identity-agent build for Kubernetes "
        "1.35",
    ]
    calls = [e["argv"] for e in rig.calls.entries("aws")]
    assert ["eks", "describe-addon-versions", "--addon-name", "vpc-cni", "--kubernetes-version", "1.35", "--region",
            "eu-west-1", "--output", "json"] in calls
    assert ["ssm", "get-parameter", "--name",
            "/aws/service/eks/optimized-ami/1.35/amazon-linux-2023/x86_64/nvidia/recommended/release_version",
            "--region", "eu-west-1", "--output", "json"] in calls


@pytest.mark.parametrize(("mode", "reason"), [
    ("no-credentials", "`aws eks describe-addon-versions` failed: Unable to locate credentials. You can configure "
                       "credentials by running \"aws configure\"."),
    ("garbage", "`aws eks describe-addon-versions`: the answer is not JSON"),
    ("deep", "`aws eks describe-addon-versions`: the JSON is nested deeper than 64 levels"),
    ("slow", "aws eks describe-addon-versions: no complete answer within 1 s"),
])
def test_an_aws_cli_that_fails_or_answers_badly_is_one_line(rig, versions_file, monkeypatch, mode, reason):
    monkeypatch.setenv("STANDIN_AWS_RESPONSES", str(RESPONSES))
    monkeypatch.setenv("STANDIN_AWS", mode)
    result = rig.run("versions", "outdated", "--versions-file", str(versions_file), "--only", "EKS_ADDONS[1.35].vpc_cni",
                     "--timeout", "1")
    assert result.code == exit_codes.FAILED
    assert result.err.splitlines() == [f"error: EKS_ADDONS[1.35].vpc_cni: {reason}"]


# --- hostile answers ------------------------------------------------------------------------------


class _Endless(BaseHTTPRequestHandler):
    """An index that never ends (no Content-Length, bytes until the client gives up)."""

    def do_GET(self):  # noqa: N802 - http.server hook
        self.send_response(200)
        self.end_headers()
        line = b"# " + b"x" * 1022 + b"\n"
        try:
            while True:
                self.wfile.write(line * 64)
        except OSError:
            pass

    def log_message(self, *_args):
        pass


class _Dripping(BaseHTTPRequestHandler):
    """One byte every 0.1 s: no single read ever waits long, the whole answer never arrives."""

    def do_GET(self):  # noqa: N802 - http.server hook
        self.send_response(200)
        self.send_header("Content-Length", "100000")
        self.end_headers()
        try:
            for _ in range(100):
                self.wfile.write(b"#")
                self.wfile.flush()
                time.sleep(0.1)
        except OSError:
            pass

    def log_message(self, *_args):
        pass


def _deep_yaml() -> bytes:
    return b"entries:\n  keda: " + b"[" * 200 + b"]" * 200 + b"\n"


@pytest.mark.parametrize(("answer", "reason"), [
    (handler(200, b"<html><body>{{ oops: [</body></html>"), "the answer is not YAML"),
    (handler(200, b"- just\n- a list\n"), "not a Helm repository index (no 'entries' mapping)"),
    (handler(200, b"apiVersion: v1\nentries:\n  other: []\n"), "no chart 'keda' in the index"),
    (handler(200, b"\xff\xfe\x00garbage"), "the answer is not UTF-8 text"),
    (handler(200, _deep_yaml()), "refused, line 2: nested deeper than 64 levels"),
    (handler(404, b"not found"), "HTTP 404 from"),
    (handler(302, b"", {"Location": "{path}"}), "more than 5 redirects"),
    (handler(302, b"", {"Location": "http://mirror.example.invalid/charts/index.yaml"}),
     "refused to follow http://mirror.example.invalid: not https and not a --registry-override URL"),
    (_Endless, "the answer is larger than 64 MiB"),
    (_Dripping, "no complete answer within 1 s"),
])
def test_a_hostile_helm_repository_is_one_line(capsys, versions_file, answer, reason):
    # 64 MiB must arrive within the budget for the size cap to be what stops the endless answer.
    timeout = "120" if answer is _Endless else "1"
    with serve(answer) as url:
        code, out, err = outdated(capsys, versions_file, "--only", "KEDA", "--timeout", timeout,
                                  "--source-override", f"kedacore.github.io={url}")
    assert code == exit_codes.FAILED
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: KEDA: ") and reason in lines[0], err
    assert "Traceback" not in err + out


def test_a_deep_tag_list_is_one_line(capsys, versions_file):
    deep = b'{"name": "vllm/vllm-openai", "tags": ' + b"[" * 3000 + b"]" * 3000 + b"}"
    with serve(handler(200, deep, {"Content-Type": "application/json"})) as url:
        code, _, err = outdated(capsys, versions_file, "--only", "VLLM_IMAGE", "--source-override", f"docker.io={url}")
    assert code == exit_codes.FAILED
    assert err.splitlines() == ["error: VLLM_IMAGE: vllm/vllm-openai (tags): tag list from registry-1.docker.io: the "
                                "JSON is nested deeper than 64 levels"]


def test_a_tag_list_that_is_not_one(capsys, versions_file):
    with serve(handler(200, b'{"name": "vllm/vllm-openai", "tags": "v1"}')) as url:
        code, _, err = outdated(capsys, versions_file, "--only", "VLLM_IMAGE", "--source-override", f"docker.io={url}")
    assert code == exit_codes.FAILED
    assert err.splitlines() == ["error: VLLM_IMAGE: vllm/vllm-openai (tags): tag list from registry-1.docker.io: not "
                                "a distribution tag list (no 'tags' array of strings)"]


# --- the command line -----------------------------------------------------------------------------


def test_exit_codes_are_distinct():
    others = {exit_codes.OK, exit_codes.FAILED, exit_codes.USAGE, exit_codes.LOCKED, exit_codes.NOT_FOUND,
              exit_codes.PREFLIGHT, exit_codes.INCOMPLETE, exit_codes.INTERRUPTED, exit_codes.TERMINATED}
    assert exit_codes.OUTDATED == 7 and exit_codes.OUTDATED not in others


@pytest.mark.parametrize(("argv", "flag"), [
    (["--only", "NO_SUCH_PIN"], "--only NO_SUCH_PIN"),
    (["--timeout", "0"], "--timeout"),
    (["--kubernetes-version", "135"], "--kubernetes-version"),
    (["--source-override", "kedacore.github.io=ftp://x"], "--source-override"),
    (["--region", "mars-north-1"], "--region"),
])
def test_bad_flags_exit_2_with_one_line(capsys, versions_file, argv, flag):
    code, _, err = outdated(capsys, versions_file, *argv)
    assert code == exit_codes.USAGE
    assert len(err.strip().splitlines()) == 1 and err.startswith("error: ") and flag in err, err


def test_a_versions_file_that_does_not_load(capsys, tmp_path):
    path = tmp_path / "versions.py"
    path.write_text("KEDA = HelmChart(\n")
    code, _, err = outdated(capsys, path)
    assert code == exit_codes.USAGE
    assert err.splitlines() == [f"error: --versions-file {path}: SyntaxError: '(' was never closed (versions.py, "
                                "line 1)"]


def test_the_command_as_a_user_runs_it(versions_file):
    """A real process: a dripping repository ends in the documented code and one line, no traceback."""
    with serve(_Dripping) as url:
        run = subprocess.run([sys.executable, "-m", "automation", "versions", "outdated", "--versions-file",
                              str(versions_file), "--only", "KEDA", "--timeout", "1", "--source-override",
                              f"kedacore.github.io={url}"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == exit_codes.FAILED == 1
    assert run.stderr.splitlines() == ["error: KEDA: https://kedacore.github.io/charts/index.yaml: no complete answer "
                                       "within 1 s"]
