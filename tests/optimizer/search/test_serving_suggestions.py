"""Serving answers that add up and suggestions that fit [issue 48 items 4 and 5]."""

from __future__ import annotations

from typing import Any

from optimizer.search.inference_planner import memory_suggestions
from optimizer.search.serving_fleet import FleetSolve, _why
from optimizer.spec.gpu_catalog import resolve_gpu
from optimizer.spec.workload import InferenceWorkload


def _solved(mine: float, theirs: float) -> dict[str, Any]:
    return {
        "disaggregated": (FleetSolve("OPTIMAL", [], mine, mine), None, None),
        "aggregated": (FleetSolve("OPTIMAL", [], theirs, theirs), None, None),
    }


def test_why_compares_against_the_other_fleet() -> None:
    w = InferenceWorkload(prompt_len=1000, output_len=100, objective="max_rate", disaggregation="auto")
    text = _why("disaggregated", _solved(140.1, 33.4), w)
    assert "(319.5% more)" in text, text


def test_why_for_fewer_gpus_is_the_share_saved() -> None:
    w = InferenceWorkload(prompt_len=1000, output_len=100, rate=10, objective="gpus", disaggregation="auto")
    assert "(50.0% less)" in _why("disaggregated", _solved(8, 16), w)


def test_batch_one_on_a100_suggests_int4_not_fp8_nor_a_lower_batch() -> None:
    w = InferenceWorkload(prompt_len=1000, output_len=100, batch=1)
    changes = [s.change for s in memory_suggestions(w, [resolve_gpu("A100-SXM-40GB")])]
    assert "int4 weights" in changes
    assert "fp8 weights and KV cache" not in changes
    assert "fewer concurrent sequences" not in changes


def test_hopper_at_batch_eight_gets_fp8_and_a_lower_batch() -> None:
    w = InferenceWorkload(prompt_len=1000, output_len=100, batch=8)
    changes = [s.change for s in memory_suggestions(w, [resolve_gpu("H100-SXM-80GB")])]
    assert changes[:3] == ["more GPUs", "fewer concurrent sequences", "fp8 weights and KV cache"]
    int4_w = w.model_copy(update={"weight_dtype": "int4"})
    assert "int4 weights" not in [s.change for s in memory_suggestions(int4_w, [resolve_gpu("H100-SXM-80GB")])]
