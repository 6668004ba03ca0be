"""Where the project is: the checkout holding Pulumi.yaml, the stack files and the policy pack.

Apart from the offline check so that reading a stack file imports nothing of Pulumi."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
