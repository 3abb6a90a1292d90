"""The text output of `meshplan plan` names what was planned: the model and the cluster (issue 37 item 6)."""

from __future__ import annotations

from typer.testing import CliRunner

from api.cli import app


def test_the_plan_header_names_the_model_and_the_cluster() -> None:
    args = ["plan", "--model", "llama-3-8b", "--cluster", "dgx-h100:1", "--gbs", "8", "--seq-len", "2048"]
    result = CliRunner().invoke(app, [*args, "--time-limit", "5", "--top", "1"])
    assert result.exit_code == 0, result.output
    assert "llama-3-8b on dgx-h100-x1 (8 GPUs, training)" in result.output
    assert "plan on cluster" not in result.output
