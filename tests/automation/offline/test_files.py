"""The check's files made resource by resource (``automation/offline/files.py``) are byte for byte
those written from the finished plan: ``write_json(redact_plan(plan))`` and ``write_manifests``."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from automation.offline.emit import write_json
from automation.offline.files import StreamedFiles
from automation.offline.manifests import redact_plan, write_manifests
from automation.offline.plan import ROOT, Plan, PlannedResource
from tests.support.processes import running


def _from_finished_plan(plan: Plan, out: Path) -> dict[str, bytes]:
    ordered = Plan(plan.project, plan.stack, sorted(plan.resources, key=lambda r: r.urn))
    (out / "manifests").mkdir(parents=True)
    write_json(out / "plan.json", redact_plan(ordered))
    write_manifests(ordered, out / "manifests")
    return _files(out)


def _files(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def test_files_rendered_one_by_one_are_those_of_the_finished_plan(stack_plan, tmp_path):
    expected = _from_finished_plan(stack_plan, tmp_path / "finished")
    assert any("[secret]" in text.decode() for text in expected.values()), "the stack has secrets to redact"
    out = tmp_path / "streamed"
    (out / "manifests").mkdir(parents=True)
    (out / "manifests" / "left-by-an-older-check.yaml").write_text("kind: Gone\n")
    with StreamedFiles(out, stack_plan.project, stack_plan.stack) as files:
        for resource in reversed(stack_plan.resources):  # handed over in another order than the file's
            files.submit(resource)
        files.end(sorted(stack_plan.resources, key=lambda r: r.urn))
        paths = files.finish()
    assert _files(out) == expected
    assert sorted(str(p.relative_to(out)) for p in paths) == sorted(k for k in expected if k.startswith("manifests/"))


def test_of_two_manifests_with_one_file_name_the_later_in_the_order_is_written(tmp_path):
    def service(urn: str, port: int) -> PlannedResource:
        return PlannedResource(urn=urn, type="kubernetes:core/v1:Service", name="s", parent="", custom=True,
                               inputs={"kind": "Service", "metadata": {"name": "s", "namespace": "n"},
                                       "spec": {"ports": [{"port": port}]}})

    first, second = service("urn:pulumi:a::p::kubernetes:core/v1:Service::s1", 1), \
        service("urn:pulumi:a::p::kubernetes:core/v1:Service::s2", 2)
    for order in ([first, second], [second, first]):
        out = tmp_path / str(order[0].inputs["spec"]["ports"][0]["port"])
        with StreamedFiles(out, "p", "a") as files:
            files.submit(second)  # the last one submitted is not the one that wins
            files.submit(first)
            files.end(order)
            (path,) = files.finish()
        assert path.name == "service-n-s.yaml" and f"port: {order[-1].inputs['spec']['ports'][0]['port']}" in path.read_text()
        assert [r["urn"] for r in json.loads((out / "plan.json").read_text())["resources"]] == [r.urn for r in order]


def test_a_resource_never_submitted_is_written_too(dev_plan, tmp_path):
    expected = _from_finished_plan(dev_plan, tmp_path / "finished")
    out = tmp_path / "streamed"
    ordered = sorted(dev_plan.resources, key=lambda r: r.urn)
    with StreamedFiles(out, dev_plan.project, dev_plan.stack) as files:
        for resource in ordered[1:]:
            files.submit(resource)
        files.end(ordered)
        files.finish()
    assert _files(out) == expected


_FORKED = r"""
import json, os, sys, time
from pathlib import Path
from automation.offline import forked
from automation.offline.files import StreamedFiles
from automation.offline.plan import PlannedResource

out, mode = Path(sys.argv[1]), sys.argv[2]
resources = [PlannedResource(**r) for r in json.loads(Path(sys.argv[3]).read_text())]
files = StreamedFiles(out, "llm-platform", "dev", niceness=3)
pid = files.pid
assert pid is not None and pid != os.getpid(), "a forked writer where the check can fork"
for resource in resources:
    files.submit(resource)
if mode == "leave":
    files.close()
    time.sleep(0.2)
    print(json.dumps({"pid": pid}))
else:
    files.end(sorted(resources, key=lambda r: r.urn))
    paths = files.finish()
    files.close()
    print(json.dumps({"pid": pid, "paths": len(paths)}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the writer is forked on Linux only")
@pytest.mark.parametrize("mode", ["finish", "leave"])
def test_the_forked_writer_writes_the_same_files_or_nothing_when_left(dev_plan, tmp_path, mode):
    """As the CLI runs it (a process of its own, so it can fork): the same files as from the finished
    plan; left before the end, the writer is stopped and writes no file."""
    expected = _from_finished_plan(dev_plan, tmp_path / "finished")
    plan_file = tmp_path / "resources.json"
    plan_file.write_text(json.dumps([r.__dict__ for r in dev_plan.resources]))
    out = tmp_path / "streamed"
    done = subprocess.run([sys.executable, "-c", _FORKED, str(out), mode, str(plan_file)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    answer = json.loads(done.stdout)
    deadline = time.monotonic() + 5
    while running(answer["pid"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not running(answer["pid"])
    if mode == "leave":
        assert not out.exists() or _files(out) == {}
    else:
        assert _files(out) == expected and answer["paths"] == sum(k.startswith("manifests/") for k in expected)
