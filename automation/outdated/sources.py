"""Ask each pin's source for its newest version (docs/versions.md).

Helm repositories: ``GET <repository>/index.yaml`` over https (``entries.<chart>[]`` with ``version``,
``created``, ``kubeVersion``: Helm's repository index format). OCI charts and images: the registry's tag
list through :class:`automation.images.registry.RegistryClient`, the client ``images resolve`` uses
(anonymous pull tokens, redirects only to https or an override). EKS add-ons and the AMI release: the
``aws`` CLI with the caller's credentials. Each source is asked once per run, each exchange bounded in
time and size (:mod:`automation.outdated.bounded`); a bad answer becomes that pin's one-line error.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin, urlsplit

import requests
import yaml

from automation.images.reference import ReferenceError, parse
from automation.images.registry import MAX_REDIRECTS, RegistryClient
from automation.images.routing import Router, Unresolved, loopback
from automation.outdated import order
from automation.outdated.bounded import SourceError, loads_json, read_capped, within
from automation.outdated.pins import Pin
from automation.stacks import YamlLimitError, load_yaml

#: Seconds one source may take to answer completely (connection, redirects, token, every page and byte).
DEFAULT_TIMEOUT = 30.0
#: A Helm repository index lists every version of every chart it holds: prometheus-community's is
#: about 25 MiB. Anything over this is refused while it is read.
MAX_INDEX_BYTES = 64 * 1024 * 1024
_REDIRECTS = {301, 302, 303, 307, 308}
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}")


@dataclass(frozen=True)
class Newest:
    """What a source says is the newest version shaped like the pin, with what it says about it."""

    version: str | None
    released: str | None = None  #: YYYY-MM-DD where the source dates its releases
    supports: bool | None = None  #: whether it runs on the Kubernetes minor asked; None: not known
    basis: str = ""  #: what ``supports`` rests on


@dataclass(frozen=True)
class Finding:
    pin: Pin
    kubernetes: str
    newest: Newest | None = None
    error: str | None = None

    @property
    def status(self) -> str:
        if self.error is not None or self.newest is None or self.newest.version is None:
            return "error"
        return "behind" if order.is_behind(self.pin.pinned, self.newest.version) else "current"

    def to_json(self) -> dict[str, Any]:
        newest = self.newest or Newest(None)
        return {"name": self.pin.name, "kind": self.pin.kind, "source": self.pin.source, "pinned": self.pin.pinned,
                "newest": newest.version, "released": newest.released, "kubernetesVersion": self.kubernetes,
                "supportsKubernetes": newest.supports, "supportBasis": newest.basis or None,
                "status": self.status, "error": self.error}


AwsRunner = Callable[[list[str], float], str]


def aws_cli(args: list[str], seconds: float) -> str:
    """``aws ARGS --output json``'s stdout; a missing CLI, a timeout or a failure is one line."""
    if shutil.which("aws") is None:
        raise SourceError("the aws CLI is not on PATH (install AWS CLI v2)")
    try:
        done = subprocess.run(["aws", *args, "--output", "json"], capture_output=True, text=True, timeout=seconds,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise SourceError(f"`aws {' '.join(args[:2])}`: no answer within {seconds:g} s") from None
    if done.returncode != 0:
        lines = [line.strip() for line in done.stderr.splitlines() if line.strip()]
        raise SourceError(f"`aws {' '.join(args[:2])}` failed: {(lines[-1] if lines else f'exit {done.returncode}')[:300]}")
    return done.stdout


class Sources:
    """The sources of one run: answers cached per source, every exchange bounded by ``timeout`` seconds."""

    def __init__(self, overrides: Mapping[str, str] | None = None, timeout: float = DEFAULT_TIMEOUT,
                 region: str = "us-east-1", aws: AwsRunner = aws_cli):
        self.overrides = dict(overrides or {})
        self.router = Router(self.overrides)
        self.timeout = timeout
        self.region = region
        self.aws = aws
        self._answers: dict[tuple[str, ...], Any] = {}

    def check(self, pin: Pin, kubernetes: str) -> Finding:
        """``pin`` against its source; ``kubernetes`` is the minor a pin not made per minor must support."""
        minor = pin.minor or kubernetes
        try:
            if pin.kind == "chart" and not pin.subject.is_oci:
                newest = self._from_index(pin, minor)
            elif pin.kind in ("chart", "image"):
                newest = self._from_tags(pin, minor)
            elif pin.kind == "addon":
                newest = self._from_addons(pin, minor)
            else:
                newest = self._from_ami_parameter(pin, minor)
        except SourceError as exc:
            return Finding(pin, minor, error=str(exc))
        except Unresolved as exc:
            return Finding(pin, minor, error=f"{pin.source}: {exc}")
        if newest.version is None:
            return Finding(pin, minor, newest, error=f"{pin.source}: no version shaped like {pin.pinned!r}")
        return Finding(pin, minor, newest)

    def _cached(self, key: tuple[str, ...], what: str, exchange: Callable[[float], Any]) -> Any:
        if key not in self._answers:
            try:
                self._answers[key] = (True, within(self.timeout, what, exchange))
            except (SourceError, Unresolved) as exc:
                self._answers[key] = (False, exc)
        ok, value = self._answers[key]
        if not ok:
            raise value
        return value

    # --- Helm repository index ---------------------------------------------------------------------

    def _from_index(self, pin: Pin, minor: str) -> Newest:
        chart = pin.subject
        url = chart.repository.rstrip("/") + "/index.yaml"
        index = self._cached(("index", url), url, lambda deadline: self._index(url, deadline))
        entries = index.get(chart.chart)
        if not isinstance(entries, list) or not entries:
            raise SourceError(f"{url}: no chart {chart.chart!r} in the index")
        by_version = {str(e.get("version")): e for e in entries if isinstance(e, dict) and e.get("version")}
        version = order.newest(chart.version, by_version)
        if version is None:
            return Newest(None)
        entry = by_version[version]
        created = str(entry.get("created") or "")
        released = created[:10] if _DATE.match(created) else None
        constraint = entry.get("kubeVersion")
        if not constraint:
            return Newest(version, released, None, "the index gives no kubeVersion")
        try:
            supports = order.admits(str(constraint), order.eks_version(minor))
        except order.ConstraintError:
            return Newest(version, released, None, f"kubeVersion {str(constraint)[:60]!r} not evaluated")
        return Newest(version, released, supports, f"kubeVersion {str(constraint)[:60]!r} (Helm's check on EKS)")

    def _index(self, url: str, deadline: float) -> dict[str, Any]:
        host = urlsplit(url).netloc
        with requests.Session() as session:
            for _ in range(MAX_REDIRECTS + 1):
                target = self.router.route(url)
                proxies = {"http": None, "https": None} if loopback(urlsplit(target).hostname) else None
                remaining = max(0.1, deadline - time.monotonic())
                try:
                    response = session.get(target, stream=True, allow_redirects=False, timeout=(remaining, remaining),
                                           headers={"Accept": "application/x-yaml, text/yaml, */*"},
                                           proxies=proxies)  # type: ignore[arg-type]  # None: no proxy for it
                except requests.Timeout:
                    raise SourceError(f"{url}: no answer from {host}") from None
                except requests.RequestException:
                    raise SourceError(f"{url}: cannot connect to {urlsplit(url).netloc}") from None
                if response.status_code in _REDIRECTS:
                    response.close()
                    location = response.headers.get("Location")
                    if not location:
                        raise SourceError(f"{url}: HTTP {response.status_code} without a Location")
                    url = urljoin(url, location)
                    continue
                if response.status_code != 200:
                    response.close()
                    raise SourceError(f"{url}: HTTP {response.status_code} from {urlsplit(url).netloc}")
                body = read_capped(response, MAX_INDEX_BYTES, deadline, url)
                break
            else:
                raise SourceError(f"{url}: more than {MAX_REDIRECTS} redirects")
        try:
            document = load_yaml(body.decode("utf-8"))
        except UnicodeDecodeError:
            raise SourceError(f"{url}: the answer is not UTF-8 text") from None
        except YamlLimitError as exc:
            raise SourceError(f"{url}: refused, {str(exc).split(';')[0]}") from None  # drop the stack-file hint
        except yaml.YAMLError:
            raise SourceError(f"{url}: the answer is not YAML") from None
        entries = document.get("entries") if isinstance(document, dict) else None
        if not isinstance(entries, dict):
            raise SourceError(f"{url}: not a Helm repository index (no 'entries' mapping)")
        return entries

    # --- OCI tag lists -----------------------------------------------------------------------------

    def _from_tags(self, pin: Pin, minor: str) -> Newest:
        if pin.kind == "chart":
            host_path = pin.subject.repository.removeprefix("oci://").rstrip("/") + "/" + pin.subject.chart
            repository, tag = host_path, pin.pinned
        else:
            repository, tag = pin.subject.repository, pin.subject.tag
        try:
            ref = parse(repository, tag)
        except ReferenceError as exc:
            raise SourceError(f"{pin.source}: {exc}") from None
        what = f"{pin.source}"

        def exchange(deadline: float) -> list[str]:
            client = RegistryClient(self.overrides, timeout=max(0.1, deadline - time.monotonic()))
            try:
                return client.tags(ref)
            finally:
                client.close()

        tags = self._cached(("tags", ref.domain, ref.path), what, exchange)
        # Helm stores a chart version's "+" as "_" in an OCI tag (helm/helm pkg/registry/client.go).
        candidates = [t.replace("_", "+") for t in tags] if pin.kind == "chart" else tags
        per_minor = pin.minor is not None
        version = order.newest(pin.pinned, candidates, fixed=2 if per_minor else 0)
        if per_minor:
            return Newest(version, None, True, f"the release made for Kubernetes {minor}")
        return Newest(version, None, None, "a tag list says nothing about Kubernetes versions")

    # --- EKS add-ons and the AMI release (aws CLI) -------------------------------------------------

    def _aws_json(self, args: list[str]) -> Any:
        what = f"aws {' '.join(args[:2])}"
        text = self._cached(("aws", *args), what, lambda deadline: self.aws(args, max(0.1, deadline - time.monotonic())))
        return loads_json(text.encode(), f"`{what}`")

    def _from_addons(self, pin: Pin, minor: str) -> Newest:
        answer = self._aws_json(["eks", "describe-addon-versions", "--addon-name", pin.subject,
                                 "--kubernetes-version", minor, "--region", self.region])
        addons = answer.get("addons") if isinstance(answer, dict) else None
        if not isinstance(addons, list):
            raise SourceError(f"{pin.source}: no 'addons' list in the answer")
        compatible = []
        for addon in addons:
            if not isinstance(addon, dict) or addon.get("addonName") != pin.subject:
                continue
            for build in addon.get("addonVersions") or []:
                if not isinstance(build, dict) or not isinstance(build.get("addonVersion"), str):
                    continue
                clusters = {c.get("clusterVersion") for c in build.get("compatibilities") or [] if isinstance(c, dict)}
                if minor in clusters:
                    compatible.append(build["addonVersion"])
        if not compatible:
            raise SourceError(f"{pin.source}: EKS lists no {pin.subject} build for Kubernetes {minor}")
        version = order.newest(pin.pinned, compatible)
        return Newest(version, None, True, f"EKS lists it as compatible with {minor}")

    def _from_ami_parameter(self, pin: Pin, minor: str) -> Newest:
        answer = self._aws_json(["ssm", "get-parameter", "--name", pin.subject, "--region", self.region])
        parameter = answer.get("Parameter") if isinstance(answer, dict) else None
        value = parameter.get("Value") if isinstance(parameter, dict) else None
        # release_version is "<kubernetes patch>-<YYYYMMDD>", e.g. 1.35.6-20260818; the alias is v<date>.
        match = re.match(r"^\d+\.\d+\.\d+-(\d{8})$", value) if isinstance(value, str) else None
        if not match:
            raise SourceError(f"{pin.source}: the value {str(value)[:40]!r} is not a release such as 1.35.6-20260818")
        modified = str(parameter.get("LastModifiedDate") or "")  # type: ignore[union-attr]
        released = modified[:10] if _DATE.match(modified) else None
        return Newest(f"v{match.group(1)}", released, True, f"the EKS AMI release for Kubernetes {minor}")
