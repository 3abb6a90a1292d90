"""The interval model (optimizer/costmodel/uncertainty.py): quantiles, fallbacks, widening, and the fields every
estimate carries beside an unchanged point estimate."""

from __future__ import annotations

import dataclasses
import math

from optimizer.costmodel.estimate import estimate
from optimizer.costmodel.novelty import (
    GPU_FAMILY,
    KNOBS,
    UNSEEN_SOURCE,
    SupportRun,
    novelty,
    shipped_widening,
)
from optimizer.costmodel.training import estimate_training
from optimizer.costmodel.uncertainty import (
    MEMORY_METRICS,
    RunFeatures,
    interval_offsets,
    pooled_interval,
    residual_table,
    step_time_interval,
    with_intervals,
)
from optimizer.frameworks.validation import validate
from optimizer.spec.cluster_loading import build_cluster
from optimizer.spec.cluster_spec import ClusterSpec
from optimizer.spec.model_loading import load_model_preset
from optimizer.spec.model_spec import ModelSpec
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import InferenceWorkload, TrainingWorkload

# Megatron, H100, BF16, dense, 64 GPUs: tp 4 pp 2 dp 8, cp ep vp mbs 1, no recompute, ZeRO-1, 1F1B.
BASE = RunFeatures("megatron", "hopper", "bf16", False, 64, 4, 2, 8, 1, 1, 1, 1, "none", 1, "1f1b")


def _training() -> tuple[ModelSpec, ClusterSpec, TrainingWorkload, ParallelConfig]:
    """Llama 3 8B on one H100 node, tp 2 x dp 4."""
    cluster = build_cluster(
        {"name": "c", "pools": [{"name": "p", "gpu": "H100-SXM-80GB", "nodes": 1, "gpus_per_node": 8}]}
    )
    w = TrainingWorkload(global_batch_size=64, seq_len=4096)
    return load_model_preset("llama-3-8b"), cluster, w, ParallelConfig(tp=2, dp=4, mbs=1, zero_stage=1)


def test_source_weighted_quantiles() -> None:
    """Ten sources of one run each: the 10% and 90% points; a source with many runs still weighs one."""
    pairs = [(f"s{i}", float(i)) for i in range(1, 11)]
    lo, hi, method = interval_offsets(pairs)
    assert (lo, hi) == (1.0, 9.0) and "conformal" in method
    heavy = pairs + [("s10", 10.0)] * 50
    assert interval_offsets(heavy)[:2] == (lo, hi)


def test_few_sources_use_the_normal_theory_interval() -> None:
    lo, hi, method = interval_offsets([("a", 0.01), ("a", 0.02), ("b", 0.03), ("b", 0.04)])
    assert "normal-theory" in method and lo < 0.025 < hi


def test_novelty_names_what_is_beyond_the_fitted_runs() -> None:
    support = tuple(SupportRun(f"g{i}", "megatron", "hopper", "H100-SXM-80GB", "bf16", False, 64) for i in range(3))
    published = (BASE, dataclasses.replace(BASE, cp=2))
    seen = novelty(BASE, "H100-SXM-80GB", support, published, unseen_source=False)
    assert seen.values == {}
    far = novelty(dataclasses.replace(BASE, cp=8), "H100-SXM-80GB", support, published)
    assert far.values[UNSEEN_SOURCE] == 1 and far.values[KNOBS] == 2 and "cp=8 beyond" in far.words[KNOBS]
    amd = novelty(dataclasses.replace(BASE, family="cdna3"), "MI300X", support, published)
    assert amd.values[GPU_FAMILY] == 1 and "cdna3" in amd.words[GPU_FAMILY]
    assert "framework_gpu" in amd.values and "gpu_variant" not in amd.values
    variant = novelty(BASE, "H200-SXM-141GB", support, published)
    assert variant.values["gpu_variant"] == 1 and "framework_thin" not in variant.values
    thin = novelty(BASE, "H100-SXM-80GB", support[:1], published, unseen_source=False)
    assert thin.values == {"framework_thin": 1.0} and "only 1 source" in thin.words["framework_thin"]


def test_step_time_interval_says_its_basis() -> None:
    own = step_time_interval(BASE, 10.0, gpu="H100-SXM-80GB", own_source=True)
    assert own.low < 10.0 < own.high and own.runs >= 10
    assert own.basis.startswith("80% interval from") and "left-out published runs" in own.basis
    iv = step_time_interval(BASE, 10.0, gpu="H100-SXM-80GB")
    assert iv.high - iv.low > own.high - own.low and "a setup outside the fitted sources" in iv.basis
    far = step_time_interval(dataclasses.replace(BASE, family="cdna3"), 10.0, gpu="MI300X")
    assert far.high - far.low > iv.high - iv.low and "GPU family cdna3" in far.basis and "widened" in far.basis


def test_each_axis_only_widens() -> None:
    """H = sqrt(h^2 + sum x_a w_a^2): adding an axis never narrows the interval, and the shipped weights are >= 0."""
    w = shipped_widening()
    assert all(v >= 0 for v in w.weights.values())
    support = tuple(SupportRun(f"g{i}", "megatron", "hopper", "H100-SXM-80GB", "bf16", False, 64) for i in range(3))
    base = novelty(BASE, "H100-SXM-80GB", support, (BASE,), unseen_source=False)
    more = novelty(dataclasses.replace(BASE, cp=4, gpus=512), "H200-SXM-141GB", support, (BASE,), stand_in="jax")
    assert w.half_width(0.1, more) >= w.half_width(0.1, base) == 0.1


def test_training_estimate_carries_intervals_and_keeps_its_point() -> None:
    model, cluster, w, cfg = _training()
    est = estimate(model, cluster, w, cfg)
    point = estimate_training(model, cluster, w, cfg, validate(model, cluster, w, cfg))
    assert est.step_time_s == point.step_time_s and est.stages[0].memory_gb == point.stages[0].memory_gb
    assert est.step_time_interval_s is not None and est.peak_memory_interval_gb is not None
    assert est.step_time_interval_s[0] < est.step_time_s < est.step_time_interval_s[1]
    assert est.interval_basis and "step time: 80% interval" in est.interval_basis
    assert est.ttft_interval_s is None and est.tpot_interval_s is None


def test_oom_risk_when_the_upper_memory_bound_exceeds_the_gpu() -> None:
    model, cluster, w, cfg = _training()
    est = estimate(model, cluster, w, cfg)
    high = pooled_interval(1.0, MEMORY_METRICS, "memory").high
    assert high > 1
    stage = est.stages[0]
    tight = stage.memory_gb.model_copy(update={"capacity": stage.memory_gb.total * (1 + high) / 2})
    crowded = est.model_copy(update={"stages": [stage.model_copy(update={"memory_gb": tight, "fits": True})]})
    assert with_intervals(crowded, model, cluster, w, cfg).stages[0].oom_risk
    assert not est.stages[0].oom_risk


def test_inference_estimate_carries_ttft_and_tpot_intervals() -> None:
    model, cluster, _, _ = _training()
    est = estimate(model, cluster, InferenceWorkload(prompt_len=512, output_len=128, batch=8), ParallelConfig(tp=1))
    assert est.ttft_s is not None and est.tpot_s is not None
    assert est.ttft_interval_s is not None and est.ttft_interval_s[0] < est.ttft_s < est.ttft_interval_s[1]
    assert est.tpot_interval_s is not None and est.tpot_interval_s[0] < est.tpot_s < est.tpot_interval_s[1]
    assert est.step_time_interval_s is None and est.interval_basis and "TTFT" in est.interval_basis


def test_every_residual_is_finite() -> None:
    assert all(math.isfinite(r.left_out) and math.isfinite(r.in_sample) for r in residual_table())
