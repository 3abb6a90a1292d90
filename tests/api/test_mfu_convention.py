"""Every printed MFU says its convention: Megatron-Core's model FLOPs with the attention counted, over the dense
BF16 peak even for FP8 runs (issue 48 §6: "MFU 68.3%" with no word of either)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from api.cli import app
from optimizer.costmodel.result import MFU_TAG

RUNNER = CliRunner()
ARGS = ["--model", "llama-2-7b", "--cluster", "dgx-h100", "--gbs", "8", "--seq-len", "2048"]


def test_estimate_text_and_json_state_the_convention() -> None:
    text = RUNNER.invoke(app, ["estimate", *ARGS, "--tp", "8", "--precision", "fp8"])
    assert text.exit_code == 0, text.output[-300:]
    assert "MFU " in text.output and "attention" in text.output and "BF16 peak, also for FP8" in text.output
    doc = json.loads(RUNNER.invoke(app, ["estimate", *ARGS, "--tp", "8", "--json"]).stdout)
    assert "Megatron" in doc["mfu_convention"] and "PaLM" in doc["mfu_convention"]


def test_a_plan_summary_puts_the_convention_beside_its_mfu() -> None:
    r = RUNNER.invoke(app, ["plan", *ARGS, "--json"])
    summary = json.loads(r.stdout)["explanation"]["summary"]
    assert f"% ({MFU_TAG})" in summary, summary
