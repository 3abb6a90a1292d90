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


def test_estimate_prints_latency_percentiles_at_a_rate_and_at_a_concurrency() -> None:
    at_rate = _estimate("--rate", "4")["load_latency"]
    users = _estimate("--concurrency", "8", "--engine", "trtllm")["load_latency"]
    assert at_rate["rate_per_replica"] == 4.0 and users["users_per_replica"] == 8.0  # type: ignore[index]
    for doc in (at_rate, users):
        for which in ("ttft", "tpot"):
            p = doc[which]  # type: ignore[index]
            assert 0 < p["p50_s"] <= p["p90_s"] <= p["p99_s"]
    text = RUNNER.invoke(app, ["estimate", *SHAPE, "--rate", "4"])
    assert text.exit_code == 0 and "Latency at that load" in text.output and "p99" in text.output


def test_estimate_takes_the_engine_limits() -> None:
    """The engine limits are knobs on estimate (and plan): a lower memory fraction holds a smaller KV cache, so a
    crowd of users sees a longer first token; no CUDA graphs, a slower step at a small batch."""
    crowd = ("--prompt-len", "2048", "--output-len", "512", "--concurrency", "2000")
    base = RUNNER.invoke(app, ["estimate", *SERVING, *crowd, "--json"])
    low = RUNNER.invoke(app, ["estimate", *SERVING, *crowd, "--json", "--memory-fraction", "0.4"])
    assert base.exit_code == 0 and low.exit_code == 0, (base.output, low.output)
    b, lo = json.loads(base.output)["load_latency"], json.loads(low.output)["load_latency"]
    assert lo["ttft"]["p50_s"] > b["ttft"]["p50_s"]
    assert _estimate("--enforce-eager")["tpot_s"] > _estimate()["tpot_s"]
    assert (
        _estimate("--engine", "trtllm", "--trtllm-backend", "tensorrt")["tpot_s"]
        < _estimate("--engine", "trtllm")["tpot_s"]
    )


def test_bad_serving_loads_and_limits_are_one_line_exit_2() -> None:
    for extra, field in (
        (["--rate", "0"], "workload.rate"),
        (["--rate", "-3"], "workload.rate"),
        (["--concurrency", "0"], "workload.concurrency"),
        (["--memory-fraction", "0"], "workload.memory_fraction"),
        (["--memory-fraction", "1.2"], "workload.memory_fraction"),
        (["--rate", "2", "--concurrency", "4"], "concurrency"),
        (["--trtllm-backend", "onnx"], "workload.trtllm_backend"),
    ):
        result = RUNNER.invoke(app, ["estimate", *SHAPE, *extra])
        assert result.exit_code == 2, (extra, result.output)
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and field in lines[0], (extra, result.output)


def test_estimate_and_plan_declare_the_engine_limits_once() -> None:
    from api.cli import estimate, plan

    knobs = {"max_seqs", "memory_fraction", "max_batched_tokens", "chunked_prefill", "enforce_eager"}
    for command in (estimate, plan):
        names = set(command.__signature__.parameters)  # type: ignore[attr-defined]
        assert knobs | {"cuda_graph_max_batch", "trtllm_backend", "rate"} <= names
