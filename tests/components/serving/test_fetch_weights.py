"""The weight fetcher (``components/serving/fetch_weights.sh``), run for real against a stand-in aws CLI."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from components import versions
from components.specs.serving import FETCH_WEIGHTS_SCRIPT, fetch_weights_command

SCRIPT = Path(__file__).resolve().parents[3] / "components" / "serving" / "fetch_weights.sh"
#: The marker the script writes after a verified copy (its content is the object listing).
MARKER = ".llm-platform-complete"


FAKE_AWS = """#!/bin/sh
# Stand-in for the aws CLI over a local "bucket" directory ($FAKE_BUCKET). Lists keys tab-separated
# as the real CLI's text output does, adds folder-marker keys from $FAKE_MARKERS, answers the bucket's
# region from $FAKE_REGION and records the region each call used.
echo "$*|${AWS_REGION:-}" >> "$FAKE_BUCKET.calls"
if [ "$1" = "s3api" ] && [ "$2" = "get-bucket-location" ]; then
  echo "${FAKE_REGION:-None}"
elif [ "$1" = "s3api" ]; then
  prefix=$(echo "$@" | sed 's/.*--prefix \\([^ ]*\\) .*/\\1/')
  cd "$FAKE_BUCKET" && find "$prefix" -type f -printf '%p\\t%s\\n'
  [ -n "${FAKE_MARKERS:-}" ] && printf '%s\\t0\\n' $FAKE_MARKERS
  exit 0
elif [ "$1" = "s3" ] && [ "$2" = "sync" ]; then
  src=$(echo "$3" | sed 's#^s3://[^/]*/##')
  cp -r "$FAKE_BUCKET/$src/." "$4/"
  [ -n "${FAKE_TRUNCATE:-}" ] && truncate -s 1 "$4/$FAKE_TRUNCATE"
  exit 0
fi
"""


@pytest.fixture
def bucket(tmp_path):
    objects = tmp_path / "bucket" / "org" / "model"
    objects.mkdir(parents=True)
    (objects / "config.json").write_text('{"architectures": ["LlamaForCausalLM"]}')
    (objects / "model.safetensors").write_bytes(b"\0" * 4096)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    aws = bin_dir / "aws"
    aws.write_text(FAKE_AWS)
    aws.chmod(aws.stat().st_mode | stat.S_IEXEC)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "FAKE_BUCKET": str(tmp_path / "bucket")}
    return tmp_path, env


def run_fetch(tmp_path, env, bucket="models", prefix="org/model/"):
    """Exactly what the init container runs (``/bin/sh -c <script> fetch-weights ARGS``)."""
    command = fetch_weights_command(bucket, prefix, str(tmp_path / "cache"))
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=60, cwd=tmp_path)


def test_fetch_copies_verifies_then_skips_a_warm_cache(bucket):
    tmp_path, env = bucket
    first = run_fetch(tmp_path, env)
    assert first.returncode == 0, first.stderr
    assert "copied and verified 2 objects" in first.stdout
    assert (tmp_path / "cache" / MARKER).is_file()
    second = run_fetch(tmp_path, env)
    assert second.returncode == 0 and "cache warm" in second.stdout


def test_fetch_rejects_an_incomplete_copy(bucket):
    tmp_path, env = bucket
    done = run_fetch(tmp_path, {**env, "FAKE_TRUNCATE": "model.safetensors"})
    assert done.returncode == 1
    assert "incomplete copy: model.safetensors is 1, expected 4096 bytes" in done.stderr
    assert not (tmp_path / "cache" / MARKER).exists()


def test_fetch_refetches_when_the_bucket_changed(bucket):
    tmp_path, env = bucket
    assert run_fetch(tmp_path, env).returncode == 0
    (tmp_path / "bucket" / "org" / "model" / "tokenizer.json").write_text("{}")
    again = run_fetch(tmp_path, env)
    assert again.returncode == 0 and "copied and verified 3 objects" in again.stdout


def test_fetch_skips_folder_markers_keeps_spaces_and_uses_the_bucket_region(bucket):
    tmp_path, env = bucket
    spaced = tmp_path / "bucket" / "org" / "model" / "tokenizer config.json"
    spaced.write_text('{"a": 1}')
    env = {**env, "FAKE_MARKERS": "org/model/ org/model/sub/", "FAKE_REGION": "eu-central-1"}
    done = run_fetch(tmp_path, env)
    assert done.returncode == 0, done.stderr
    assert "copied and verified 3 objects" in done.stdout and "(eu-central-1)" in done.stdout
    assert (tmp_path / "cache" / "tokenizer config.json").read_text() == '{"a": 1}'
    calls = (tmp_path / "bucket.calls").read_text().splitlines()
    assert all(line.endswith("|eu-central-1") for line in calls[1:]), calls
    assert all("--region eu-central-1" in line for line in calls[1:]), calls
    again = run_fetch(tmp_path, env)
    assert again.returncode == 0 and "cache warm" in again.stdout


def test_fetch_maps_the_legacy_region_answers(bucket):
    tmp_path, env = bucket
    assert "(us-east-1)" in run_fetch(tmp_path, {**env, "FAKE_REGION": "None"}).stdout
    (tmp_path / "cache" / MARKER).unlink()
    assert "(eu-west-1)" in run_fetch(tmp_path, {**env, "FAKE_REGION": "EU"}).stdout


def test_the_container_runs_the_file_with_its_values_as_arguments(prod_plan):
    """Prod's bge-m3 is a pytorch checkpoint (source.format), which the streamer cannot read: the one model of
    the shipped stacks whose weights are still copied by this container (every other streams by default)."""
    assert FETCH_WEIGHTS_SCRIPT == SCRIPT.read_text()
    fetchers = [c for r in prod_plan.of_type("kubernetes:apps/v1:Deployment")
                for c in r.inputs["spec"]["template"]["spec"].get("initContainers", []) if c["name"] == "fetch-weights"]
    assert len(fetchers) == 1
    (container,) = fetchers
    assert container["image"] == str(versions.AWS_CLI_IMAGE)
    shell, flag, script, name, bucket, prefix, target = container["command"]
    assert (shell, flag, script, name) == ("/bin/sh", "-c", SCRIPT.read_text(), "fetch-weights")
    assert (bucket, prefix, target) == ("llm-platform-models-prod", "BAAI/bge-m3/", "/models/bge-m3")


@pytest.mark.parametrize("shell", ["sh", "dash"])
def test_the_script_is_posix_shell(shell):
    if subprocess.run(["which", shell], capture_output=True).returncode:
        pytest.skip(f"{shell} is not installed")
    assert subprocess.run([shell, "-n", str(SCRIPT)], capture_output=True).returncode == 0


def test_the_file_runs_on_its_own_and_refuses_a_wrong_argument_count(bucket):
    tmp_path, env = bucket
    wrong = subprocess.run(["sh", str(SCRIPT), "models"], env=env, capture_output=True, text=True, timeout=60)
    assert wrong.returncode == 2 and "usage: fetch_weights.sh BUCKET PREFIX TARGET" in wrong.stderr
    done = subprocess.run(["sh", str(SCRIPT), "models", "org/model/", str(tmp_path / "cache")],
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "copied and verified 2 objects" in done.stdout, done.stderr


def test_values_are_data_not_shell(bucket):
    """A bucket or target that looks like shell is passed through, never run."""
    tmp_path, env = bucket
    done = run_fetch(tmp_path, env, bucket="models; touch pwned-bucket $(touch pwned-subst)")
    assert done.returncode == 0, done.stderr
    assert not list(tmp_path.glob("pwned*")) and not list(Path.cwd().glob("pwned*"))
    calls = (tmp_path / "bucket.calls").read_text()
    assert "--bucket models; touch pwned-bucket $(touch pwned-subst)" in calls
