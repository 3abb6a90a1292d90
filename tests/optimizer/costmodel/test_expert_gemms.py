"""How fast the routed experts' GEMMs run: per local expert, by the rows routed to it and fc2's reduction depth."""

from __future__ import annotations

import pytest

from optimizer.costmodel.compute import depth_factor
from optimizer.costmodel.stage import CostContext
from optimizer.spec.cluster_loading import resolve_cluster
from optimizer.spec.model_loading import resolve_model
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import TrainingWorkload


@pytest.mark.parametrize(
    ("k", "tflops"),
    # DeepGEMM README, normal FP8 GEMMs on H800/H100 at 4,096 rows: (K, TFLOP/s)
    [(512, 590), (1536, 990), (2048, 1025), (7168, 1304), (16384, 1358)],
)
def test_depth_factor_follows_deepgemms_table(k: int, tflops: float) -> None:
    deep = 1358 / depth_factor(16384)  # the rate at unbounded depth, from the deepest row
    assert deep * depth_factor(k) == pytest.approx(tflops, rel=0.03)


def test_experts_split_over_tp_run_a_short_fc2() -> None:
    """Qwen3-235B's experts are 1,536 wide: split 4 ways by expert TP, fc2 reduces over 384 and runs far below
    the unsplit rate, which is why Megatron recommends etp 1 for fine-grained experts."""
    model, cluster = resolve_model("qwen3-235b-a22b"), resolve_cluster("dgx-h100:32")
    w = TrainingWorkload(global_batch_size=2048, seq_len=4096, precision="fp8")
    gpu = cluster.gpu_of(cluster.pools[0])
    split = CostContext(model, cluster, w, ParallelConfig(tp=4, dp=8, pp=8, mbs=2, sequence_parallel=True), 1)
    whole = CostContext(
        model, cluster, w, ParallelConfig(tp=4, dp=8, pp=8, ep=4, etp=1, mbs=2, sequence_parallel=True), 1
    )
    assert split.expert_efficiency(gpu) < 0.85 * whole.expert_efficiency(gpu)
