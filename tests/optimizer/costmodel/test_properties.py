"""Properties that must hold for any configuration (hypothesis)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optimizer.costmodel.estimate import estimate
from optimizer.errors import DomainError
from optimizer.spec.cluster_loading import build_cluster
from optimizer.spec.cluster_spec import ClusterSpec
from optimizer.spec.model_loading import load_model_preset
from optimizer.spec.parallel_config import RECOMPUTES, ParallelConfig
from optimizer.spec.workload import TrainingWorkload

MODEL = load_model_preset("llama-2-13b")
W = TrainingWorkload(global_batch_size=16, seq_len=2048)


def cluster(memory_gib: float = 80.0, nodes: int = 8) -> ClusterSpec:
    return build_cluster(
        {
            "name": "c",
            "gpu_types": [
                {
                    "name": "G",
                    "bf16_tflops": 989,
                    "memory_gib": memory_gib,
                    "memory_tbps": 3.35,
                    "scaleup_gbytes_per_s": 450,
                    "scaleup_domain": 8,
                    "family": "hopper",
                }
            ],
            "pools": [{"name": "p", "gpu": "G", "nodes": nodes, "gpus_per_node": 8}],
        }
    )


configs = st.builds(
    ParallelConfig,
    tp=st.sampled_from([1, 2, 4, 8]),
    pp=st.sampled_from([1, 2, 4, 5]),
    dp=st.sampled_from([1, 2]),
    mbs=st.sampled_from([1, 2]),
    zero_stage=st.sampled_from([0, 1]),
    recompute=st.sampled_from(RECOMPUTES),
)


def examples(n: int) -> settings:
    """Hypothesis settings: `n` examples, no per-example deadline and no too-slow health check."""
    return settings(max_examples=n, suppress_health_check=[HealthCheck.too_slow], deadline=None)


@examples(60)
@given(cfg=configs)
def test_more_tp_never_raises_weight_memory(cfg: ParallelConfig) -> None:
    c = cluster()
    try:
        base = estimate(MODEL, c, W, cfg)
        more = estimate(MODEL, c, W, cfg.model_copy(update={"tp": cfg.tp * 2}))
    except DomainError:
        return
    for a, b in zip(base.stages, more.stages, strict=True):
        assert (
            b.memory_gb.weights + b.memory_gb.embedding_lm_head <= a.memory_gb.weights + a.memory_gb.embedding_lm_head
        )


@examples(60)
@given(cfg=configs, extra=st.floats(min_value=1.0, max_value=200.0))
def test_fits_keeps_fitting_with_more_memory(cfg: ParallelConfig, extra: float) -> None:
    try:
        small = estimate(MODEL, cluster(40.0), W, cfg)
    except DomainError:
        return
    big = estimate(MODEL, cluster(40.0 + extra), W, cfg)
    if small.feasible:
        assert big.feasible
    assert big.step_time_s == small.step_time_s  # memory size alone changes no time


@examples(40)
@given(cfg=configs)
def test_recompute_costs_time_and_saves_memory(cfg: ParallelConfig) -> None:
    c = cluster()
    try:
        none = estimate(MODEL, c, W, cfg.model_copy(update={"recompute": "none"}))
        full = estimate(MODEL, c, W, cfg.model_copy(update={"recompute": "full"}))
    except DomainError:
        return
    assert full.step_time_s >= none.step_time_s
    assert full.stages[0].memory_gb.activations <= none.stages[0].memory_gb.activations
