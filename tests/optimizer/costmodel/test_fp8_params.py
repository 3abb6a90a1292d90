"""FP8 primary weights (Megatron --fp8-param-gather, set by every Megatron-Bridge FP8 recipe): no bf16 weight copy,
parameters all-gathered in FP8; refused where the framework has no such mode, needs the distributed optimizer."""

from __future__ import annotations

import pytest

from optimizer.costmodel.estimate import estimate
from optimizer.errors import DomainError
from optimizer.exports.launch import export
from optimizer.search.planner import plan
from optimizer.spec.cluster_loading import resolve_cluster
from optimizer.spec.model_loading import resolve_model
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import TrainingWorkload
from optimizer.spec.workload_loading import build_training


def _w(**kw: object) -> TrainingWorkload:
    return build_training(**{"global_batch_size": 64, "seq_len": 8192, "precision": "fp8", **kw})


CFG = ParallelConfig(tp=4, pp=4, dp=4, vp=5, mbs=1, schedule="interleaved-1f1b", sequence_parallel=True, zero_stage=1)


def test_fp8_primary_weights_hold_two_bytes_and_gather_one() -> None:
    """TE keeps the FP8 weight and its transposed FP8 copy (2 B) instead of bf16 + FP8 (3 B); the distributed
    optimizer's parameter all-gather moves 1 B per parameter instead of 2."""
    model, cluster = resolve_model("llama-3-70b"), resolve_cluster("dgx-h100:8")
    plain = estimate(model, cluster, _w(), CFG)
    fp8p = estimate(model, cluster, _w(fp8_param_gather=True), CFG)
    a, b = plain.stages[1].memory_gb, fp8p.stages[1].memory_gb
    assert b.weights == pytest.approx(a.weights * 2 / 3)
    assert b.gradients == pytest.approx(a.gradients) and b.optimizer == pytest.approx(a.optimizer)
    assert fp8p.breakdown.dp_comm < plain.breakdown.dp_comm


@pytest.mark.parametrize(
    ("fields", "config", "field", "words"),
    [
        ({"precision": "bf16", "fp8_param_gather": True}, CFG, "workload.fp8_param_gather", "need precision fp8"),
        ({"fp8_param_gather": True, "framework": "torchtitan"}, CFG, "workload.fp8_param_gather", "torchtitan"),
        ({"fp8_param_gather": True}, CFG.model_copy(update={"zero_stage": 0}), "config.zero_stage", "distributed"),
    ],
)
def test_fp8_param_gather_rules(fields: dict[str, object], config: ParallelConfig, field: str, words: str) -> None:
    model, cluster = resolve_model("llama-3-70b"), resolve_cluster("dgx-h100:8")
    with pytest.raises(DomainError) as exc:  # the workload itself, or the estimate
        estimate(model, cluster, _w(**fields), config)
    assert exc.value.field == field and words in exc.value.rule


def test_planner_and_export_keep_fp8_primary_weights() -> None:
    """The search runs only the distributed optimizer or FSDP with FP8 primary weights, and the Megatron export
    carries the flag; exporting the plan to torchtitan names the knob."""
    model, cluster = resolve_model("llama-3-8b"), resolve_cluster("dgx-h100:1")
    w = TrainingWorkload(global_batch_size=64, seq_len=4096, precision="fp8", fp8_param_gather=True)
    r = plan(model, cluster, w, time_limit_s=30, top_k=1)
    assert r.plan is not None and r.plan.config.zero_stage >= 1
    assert "--fp8-param-gather" in export("megatron", model, w, r.plan.config).content
    with pytest.raises(DomainError) as exc:
        export("torchtitan", model, w, r.plan.config)
    assert exc.value.field == "export.fp8_param_gather"


def test_fsdp_gathers_fp8_primary_weights_in_fp8() -> None:
    """Megatron-FSDP with --fp8-param-gather all-gathers the FP8 parameters: half the bytes of the bf16 gathers, so
    a gather-bound FSDP step exposes less (the distributed optimizer's gather already did)."""
    model, cluster = resolve_model("llama-3-70b"), resolve_cluster("dgx-h100:4")
    cfg = ParallelConfig(dp=32, zero_stage=3, mbs=1, recompute="full")
    bf16 = TrainingWorkload(global_batch_size=32, seq_len=2048, precision="fp8", grad_dtype="bf16")
    fp8 = bf16.model_copy(update={"fp8_param_gather": True})
    a, b = estimate(model, cluster, bf16, cfg), estimate(model, cluster, fp8, cfg)
    assert a.breakdown.zero_gather > 0
    assert b.breakdown.zero_gather < 0.75 * a.breakdown.zero_gather


def test_fsdp_reduce_scatters_gradients_at_their_own_width_under_fp8_gathers() -> None:
    """FP8 primary weights change what the gathers move (1 B per parameter), not the gradients: the reduce-scatter
    still moves grad_dtype bytes (bf16: 2 B). On a step whose ZeRO-3 traffic is all exposed (64-token sequences),
    a layer is gathered in forward and again in backward (the recompute reuses the backward's gather) and its
    gradients reduce-scattered once: 2 + 2 + 2 bytes per parameter become 1 + 1 + 2, 2/3 of the time (the old
    pricing, the reduce-scatter at the gathers' width, made it 1/2)."""
    model, cluster = resolve_model("llama-3-70b"), resolve_cluster("dgx-h100:4")
    cfg = ParallelConfig(dp=32, zero_stage=3, mbs=1, recompute="full")
    bf16 = TrainingWorkload(global_batch_size=32, seq_len=64, precision="fp8", grad_dtype="bf16")
    fp8 = bf16.model_copy(update={"fp8_param_gather": True})
    a, b = estimate(model, cluster, bf16, cfg), estimate(model, cluster, fp8, cfg)
    assert a.breakdown.zero_gather > 10 * a.breakdown.forward  # communication-bound: the volumes decide
    assert b.breakdown.zero_gather / a.breakdown.zero_gather == pytest.approx(2 / 3, abs=0.04)
