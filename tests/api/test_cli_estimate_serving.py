"""`estimate --mode inference` takes the serving engine and dtypes `plan` takes (issue 37 item 6)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from api.cli import app

RUNNER = CliRunner()
SERVING = ["--model", "llama-3-8b", "--cluster", "dgx-h100:1", "--mode", "inference"]
SHAPE = [*SERVING, "--prompt-len", "1024", "--output-len", "128", "--batch", "8"]


def _estimate(*extra: str) -> dict[str, float]:
    result = RUNNER.invoke(app, ["estimate", *SHAPE, "--tp", "2", "--json", *extra])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)  # type: ignore[no-any-return]


def test_estimate_takes_the_engine_and_the_serving_dtypes() -> None:
    bf16 = _estimate("--engine", "sglang")
    fp8 = _estimate("--engine", "sglang", "--kv-cache-dtype", "fp8", "--weight-dtype", "fp8")
    assert fp8["peak_memory_gb"] < bf16["peak_memory_gb"] and fp8["tpot_s"] < bf16["tpot_s"]


def test_estimate_names_a_bad_engine() -> None:
    result = RUNNER.invoke(app, ["estimate", *SHAPE, "--engine", "bogus"])
    assert result.exit_code == 2 and "workload.engine" in result.output, result.output


def test_estimate_and_plan_declare_the_serving_engine_options_once() -> None:
    from api.cli import estimate, plan

    for command in (estimate, plan):
        names = command.__signature__.parameters  # type: ignore[attr-defined]
        assert {"engine", "kv_cache_dtype", "weight_dtype"} <= set(names)


def test_a_moe_layout_the_engine_cannot_run_is_one_line_naming_engine_and_rule() -> None:
    """TensorRT-LLM's attention DP runs attention with TP 1 per rank; EP cannot exceed the experts (issue 39)."""
    moe = ["--model", "qwen3-235b-a22b", "--cluster", "dgx-h100:1", "--mode", "inference", "--engine", "trtllm"]
    shape = ["--prompt-len", "1024", "--output-len", "128", "--batch", "8", "--weight-dtype", "fp8"]
    bad = RUNNER.invoke(app, ["estimate", *moe, *shape, "--tp", "2", "--dp", "4", "--ep", "8", "--etp", "1"])
    assert bad.exit_code == 2, bad.output
    lines = [ln for ln in bad.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "config.tp" in lines[0] and "trtllm" in lines[0] and "attention TP 1" in lines[0]
    good = RUNNER.invoke(app, ["estimate", *moe, *shape, "--tp", "1", "--dp", "8", "--ep", "8", "--etp", "1", "--json"])
    assert good.exit_code == 0, good.output
    tp_experts = RUNNER.invoke(app, ["estimate", *moe, *shape, "--tp", "1", "--dp", "8", "--etp", "8", "--json"])
    assert tp_experts.exit_code == 0, tp_experts.output
