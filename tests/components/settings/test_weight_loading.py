"""Per-model weight loading (issue 32): ``weights: download`` (default) or ``stream`` with the streamer's
concurrency and CPU buffer; what settings refuse, and ``check`` stopping with exit 2 at the key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from automation import exit_codes
from automation.cli import main
from automation.stacks import read_stack_config
from components.settings.serving import ServedModel
from policies.capacity.cold_start import WEIGHT_LOADINGS
from tests.support.config_changes import with_changes

BASE = {"name": "llama-8b", "source": {"s3": "s3://models-bucket/llama/"}, "pool": "gpu", "catalog": "llama-3.1-8b-instruct",
        "replicas": {"min": 0, "max": 1}, "memory": "32Gi"}


def test_an_s3_source_in_safetensors_streams_by_default_and_streaming_has_defaults():
    model = ServedModel.model_validate(BASE)
    assert (model.weights, model.source.format, model.weight_loading) == (None, "safetensors", "stream")
    assert (model.streaming.concurrency, model.streaming.memory_limit_gib) == (16, 4)
    assert WEIGHT_LOADINGS == ("download", "stream")


@pytest.mark.parametrize("changes", [
    {"source": {"huggingFace": "meta-llama/Llama-3.1-8B-Instruct"}},  # vLLM would download it to disk first
    {"source": {"s3": "s3://models-bucket/llama/", "format": "pytorch"}},  # the streamer reads safetensors only
    {"weights": "download"},  # the opt-out
])
def test_download_stays_where_the_streamer_cannot_read_the_source_or_is_opted_out(changes: dict[str, Any]):
    assert ServedModel.model_validate({**BASE, **changes}).weight_loading == "download"


@pytest.mark.parametrize("changes, fragment", [
    ({"weights": "copy"}, "Input should be 'download' or 'stream'"),
    ({"weights": "stream", "source": {"huggingFace": "meta-llama/Llama-3.1-8B-Instruct"}},
     "weights: stream reads the model from S3"),
    ({"weights": "stream", "source": {"s3": "s3://models-bucket/llama/", "format": "pytorch"}},
     "streamer reads safetensors only, and this model's source.format is pytorch"),
    ({"source": {"s3": "s3://models-bucket/llama/", "format": "gguf"}}, "Input should be 'safetensors' or 'pytorch'"),
    ({"weights": "stream", "streaming": {"memoryLimitGib": 17}}, "1 streamer buffers of 17 GiB"),
    ({"weights": "stream", "gpusPerReplica": 4, "memory": "31Gi", "streaming": {"memoryLimitGib": 4}},
     "4 streamer buffers of 4 GiB"),
    ({"weights": "stream", "streaming": {"concurrency": 0}}, "greater than or equal to 1"),
    ({"weights": "stream", "streaming": {"concurrency": 65}}, "less than or equal to 64"),
])
def test_refused(changes: dict[str, Any], fragment: str):
    with pytest.raises(ValidationError, match=fragment):
        ServedModel.model_validate({**BASE, **changes})


def test_buffers_up_to_half_the_memory_are_accepted():
    """1 rank x 16 GiB = 16,384 MiB, exactly half of 32Gi."""
    model = ServedModel.model_validate({**BASE, "weights": "stream", "streaming": {"memoryLimitGib": 16}})
    assert model.streaming.memory_limit_gib == 16


def test_check_refuses_a_streamed_hugging_face_model_with_exit_2(capsys, tmp_path: Path):
    """dev's interactive model switched to a Hugging Face source and streamed."""
    changes = {"serving.tiers.0.models.0.weights": "stream",
               "serving.tiers.0.models.0.source": {"huggingFace": "meta-llama/Llama-3.1-8B-Instruct"}}
    stack_file = tmp_path / "Pulumi.dev.yaml"
    stack_file.write_text(yaml.safe_dump({"config": with_changes(read_stack_config("dev"), changes, separator=".")}))
    capsys.readouterr()
    code = main(["check", "--stack", "dev", "--stack-file", str(stack_file), "--out", str(tmp_path / "out")])
    captured = capsys.readouterr()
    output = captured.out + captured.err
    assert code == exit_codes.USAGE == 2
    assert "Traceback" not in output
    assert "weights" in output and "weights: stream reads the model from S3" in output


def test_check_refuses_streaming_a_pytorch_checkpoint_with_one_keyed_line(capsys, tmp_path: Path):
    """dev's interactive model declared a pytorch checkpoint and streamed anyway: vLLM's Run:ai loader would
    fail the start ("Cannot find any safetensors model weights"), so the check stops at the key, exit 2."""
    changes = {"serving.tiers.0.models.0.weights": "stream",
               "serving.tiers.0.models.0.source": {"s3": "s3://llm-platform-models-dev/meta-llama/Llama-3.1-8B-Instruct/",
                                                   "format": "pytorch"}}
    stack_file = tmp_path / "Pulumi.dev.yaml"
    stack_file.write_text(yaml.safe_dump({"config": with_changes(read_stack_config("dev"), changes, separator=".")}))
    capsys.readouterr()
    code = main(["check", "--stack", "dev", "--stack-file", str(stack_file), "--out", str(tmp_path / "out")])
    captured = capsys.readouterr()
    assert code == exit_codes.USAGE == 2
    assert "Traceback" not in captured.out + captured.err and not (tmp_path / "out").exists()
    [line] = [ln for ln in captured.err.splitlines() if "safetensors only" in ln]
    assert line.strip() == (
        'llm-platform:serving.tiers[0].models[0].weights: got "stream": vLLM\'s Run:ai model streamer reads safetensors '
        "only, and this model's source.format is pytorch; convert the checkpoint to safetensors or set weights: "
        "download")
