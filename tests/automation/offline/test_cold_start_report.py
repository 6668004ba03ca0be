"""`check` prints each model's start, cold and warm, by step (policies/capacity/cold_start.py on the plan).

Expected figures are worked out by hand from docs/cold-start.md's figures: the vLLM image is 12.64 GB
compressed (downloaded at the lesser of the node's network and its root volume) and 28.60 GB unpacked
(at 150 MiB/s); downloaded weights come from S3 at the lesser of 10 x 85 MB/s, the network and the root
volume, and load from the root volume; streamed ones (the default for s3 safetensors) have no weights step and
load at the lesser of the streamer's readers x 85 MB/s, the network and 25 GB/s host-to-GPU; compile is 60 + 30 s; readiness one 10 s probe period. Cold adds a node
(Karpenter 1 + 90 + 30 = 121 s; Cluster Autoscaler 10 + 30 + 90 + 30 = 160 s) and the image; warm has both.
Every GPU pool of both stacks pulls with SOCI parallel pull (fastImagePull, on by default): the image takes
0.532 of the serial pull, e.g. on a 500 MiB/s volume (24.11 + 181.83) x 0.532 = 109.56 s. Dev's GPUs are
advertised by the standalone device plugin (20 + 10 = 30 s of the node step), prod's by the GPU Operator
(NFD 15 + validator 15 + toolkit-ready poll 5 + device plugin 20 + kubelet status 10 = 65 s): Karpenter
1 + 90 + 65 = 156 s, Cluster Autoscaler 10 + 30 + 90 + 65 = 195 s in prod.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys

from rich.console import Console

from automation.offline.plan import ROOT
from automation.offline.report import render, summarize


def _figures(summary) -> dict:
    return {model: (s.pool, s.instance, s.cold_seconds, s.warm_seconds, s.dominant_step,
                    [(step.step, step.cold_seconds, step.warm_seconds) for step in s.steps])
            for model, s in summary.cold_start.items()}


def test_dev_models_start_cold_and_warm_by_step(dev_plan):
    assert _figures(summarize(dev_plan)) == {
        # a Cluster Autoscaler group's g5.2xlarge (5 Gbps, 500 MiB/s root volume), 16,060,522,496 B of weights
        # streamed at the network's 625 MB/s (16 x 85 MB/s = 1.36 GB/s is more): 25.70 s; the image 205.94 s
        # serially x 0.532 (SOCI) = 109.56 s; cold 160 + 109.56 + 0 + 25.70 + 90 + 10 = 395.26, warm 25.70 + 100 =
        # 125.70 (downloaded: 430.8 and 161.3)
        "llama-3-1-8b-instruct": ("inference", "g5.2xlarge", 395.3, 125.7, "node", [
            ("node", 160.0, 0.0), ("image", 109.6, 0.0), ("weights", 0.0, 0.0), ("load", 25.7, 25.7),
            ("compile", 90.0, 90.0), ("readiness", 10.0, 10.0)]),
        # Karpenter's cheapest fitting type, g5.4xlarge (10 Gbps), 15,231,233,024 B streamed at 1.25 GB/s: 12.18 s;
        # cold 121 + 109.56 + 12.18 + 100 = 342.75, warm 112.18 (downloaded: 388.7 and 158.1)
        "qwen2-5-7b-instruct": ("gpu-inference", "g5.4xlarge", 342.7, 112.2, "node", [
            ("node", 121.0, 0.0), ("image", 109.6, 0.0), ("weights", 0.0, 0.0), ("load", 12.2, 12.2),
            ("compile", 90.0, 90.0), ("readiness", 10.0, 10.0)]),
    }


def test_prod_models_start_cold_and_warm_by_step(prod_plan):
    figures = _figures(summarize(prod_plan))
    # The 70B AWQ model on a new g5.12xlarge (40 Gbps) streams its 39.80 GB of weights straight to the GPUs
    # with 32 S3 connections at 85 MB/s each (2.72 GB/s, below the network): no copy step, a 14.6 s load; the
    # image (16.07 + 181.83) x 0.532 = 105.29 s with SOCI: 156 + 105.29 + 14.63 + 90 + 10 = 375.9 s cold.
    assert figures["llama-3-1-70b-instruct-awq"] == ("gpu-interactive", "g5.12xlarge", 375.9, 114.6, "node", [
        ("node", 156.0, 0.0), ("image", 105.3, 0.0), ("weights", 0.0, 0.0), ("load", 14.6, 14.6),
        ("compile", 90.0, 90.0), ("readiness", 10.0, 10.0)])
    # Textbook: a stream arrives at its readers' rate, 16 x 85 MB/s = 1.36 GB/s, so 19,341,776,035.84 B
    # (32.76e9 parameters: 31.21e9 at 4.16 bits + 1.56e9 embeddings at 16) would load in 14.2 s. The answer on
    # a g6e.xlarge: its 2.5 Gbps network (312.5 MB/s) is the limit, 61.89 s. Image (40.45 + 181.83) x 0.532 =
    # 118.25 s: 195 + 118.25 + 0 + 61.89 + 90 + 10 = 475.1 s cold, 161.9 s warm (downloaded: 512.0 and 198.8,
    # a 61.9 s copy at the network's rate and a 36.9 s read from the 500 MiB/s disk).
    assert figures["qwen2-5-32b-instruct"][2:4] == (475.1, 161.9)
    assert figures["qwen2-5-32b-instruct"][5][2:4] == [("weights", 0.0, 0.0), ("load", 61.9, 61.9)]
    # bge-m3 is a pytorch checkpoint (source.format): downloaded, as before.
    # 195 + 109.56 + 2.17 + 2.17 + 90 + 10 = 408.9
    assert figures["bge-m3"][:5] == ("inference-a10g", "g5.2xlarge", 408.9, 104.3, "node")


def test_the_summary_renders_a_cold_start_section(prod_plan):
    out = io.StringIO()
    render(summarize(prod_plan), Console(file=out, width=200, color_system=None))
    text = out.getvalue()
    assert "Cold start (predicted, docs/cold-start.md)" in text
    row = next(line for line in text.splitlines() if "llama-3-1-70b-instruct-awq" in line and "g5.12xlarge" in line)
    assert "376 s" in row and "115 s" in row and "node 156 / 0 s" in row and row.rstrip(" │").endswith("node")
    assert "image 105 / 0 s" in text


def test_check_json_carries_cold_start_per_model(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "automation", "check", "--stack", "dev", "--out", str(tmp_path / "out"),
         "--output", "json"], cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    cold_start = json.loads(done.stdout)["summary"]["cold_start"]
    assert sorted(cold_start) == ["llama-3-1-8b-instruct", "qwen2-5-7b-instruct"]
    llama = cold_start["llama-3-1-8b-instruct"]
    assert (llama["cold_seconds"], llama["warm_seconds"], llama["dominant_step"]) == (395.3, 125.7, "node")
    assert llama["steps"][1] == {
        "step": "image", "cold_seconds": 109.6, "warm_seconds": 0.0,
        "detail": "vllm/vllm-openai:v0.33.0: 12.64 GB at 500 MiB/s, 28.60 GB unpacked at 150 MiB/s, "
                  "in parallel (SOCI) at 0.532 of that"}
