"""`meshplan plan ... --export megatron > out.txt` (the README's example, on a smaller cluster): the export in the
text output is the --json export's bytes, unwrapped, on a pipe (rich's 150 columns) and on a narrow terminal, and
pasted into bash every argument reaches the launcher, the long pipeline layout in one piece."""

from __future__ import annotations

import json

import pytest
from rich.console import Console
from typer.testing import CliRunner

import api.cli
from api.cli import app
from optimizer.exports.launch import Export
from tests.optimizer.exports.test_export_paste import after_launcher, argv, flag_values

RUNNER = CliRunner()
# 126 layers on 16 ranks x 4 virtual stages: the layout is 64 stages, ~250 characters on one line.
PLAN = ["plan", "--model", "llama-3.1-405b", "--cluster", "dgx-h100:32", "--gbs", "512", "--seq-len", "4096"]
PINS = [w for pin in ("tp=8", "pp=16", "vp=4", "dp=2", "cp=1", "mbs=1") for w in ("--pin", pin)]


def run(*extra: str) -> str:
    r = RUNNER.invoke(app, [*PLAN, *PINS, "--time-limit", "20", "--export", "megatron", *extra])
    assert r.exit_code == 0, r.output
    return r.stdout


@pytest.mark.parametrize("terminal", [None, 60])
def test_cli_megatron_export_pastes_whole(terminal: int | None, monkeypatch: pytest.MonkeyPatch) -> None:
    doc = json.loads(run("--json"))
    exported = Export.model_validate(doc["export"])
    layout = next(line for line in exported.content.splitlines() if "--pipeline-model-parallel-layout" in line)
    assert len(layout) > 150  # what rich wrapped
    if terminal is not None:  # an interactive terminal of `terminal` columns, colours on
        monkeypatch.setattr(api.cli, "out", Console(width=terminal, force_terminal=True, color_system="truecolor"))
    text = run()
    assert ":\n" + exported.script() in text  # byte for byte what --json (and the API) carries, lines of its own
    flags = flag_values(argv(after_launcher(exported.script(), "pretrain_gpt"), "pretrain_gpt"))
    assert list(flags) == [o for o in exported.options if o.startswith("--")]
    cfg = doc["plan"]["config"]
    assert flags["--pipeline-model-parallel-layout"][0].count("|") == cfg["pp"] * cfg["vp"] - 1 == 63
    assert flags["--tensor-model-parallel-size"] == [str(cfg["tp"])] and flags["--global-batch-size"] == ["512"]


def test_print_export_writes_the_bytes_rich_would_rewrite(capsys: pytest.CaptureFixture[str]) -> None:
    """A long environment value, a tab, and text rich takes for an emoji code or markup stay as they are."""
    split = ",".join(["2"] * 63)  # VLLM_PP_LAYER_PARTITION of 64 ranks: a 160-character line
    content = "vllm serve org/model:latest \\\n  --x ':smile:'\\\n  --y '[bold]a\tb[/bold]'"
    e = Export(
        tool="vllm", format="args", content=content, options=["--x", "--y"], env={"VLLM_PP_LAYER_PARTITION": split}
    )
    api.cli.print_export(e)
    assert f"export VLLM_PP_LAYER_PARTITION={split}\n{content}\n" in capsys.readouterr().out
