"""Pricing a sharding group smaller than the data-parallel group [formulas C9, C10]: the states it shards, the
tiers its collectives run on, and how often its replicas all-reduce."""

from __future__ import annotations

import dataclasses

import pytest

from optimizer.costmodel import network as net
from optimizer.costmodel.estimate import estimate
from optimizer.costmodel.result import Estimate
from optimizer.costmodel.stage import CostContext, stage_cost
from optimizer.costmodel.terms.data_parallel import Zero3Schedule, replica_reduce, sharded_groups, zero3_exposed
from optimizer.spec.cluster_loading import load_cluster_preset
from optimizer.spec.model_loading import load_model_preset
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import TrainingWorkload

LLAMA8B = load_model_preset("llama-3-8b")
FOUR_NODES = load_cluster_preset("dgx-h100:4")  # 8 H100 per node, NVLink inside, 8 x 400 Gb/s between


def run(framework: str, gbs: int = 64, **fields: object) -> Estimate:
    w = TrainingWorkload(global_batch_size=gbs, seq_len=4096, framework=framework)
    return estimate(LLAMA8B, FOUR_NODES, w, ParallelConfig.model_validate(fields))


def test_halving_the_group_doubles_the_sharded_states() -> None:
    # Megatron's distributed optimizer: only the optimizer states are sharded (ZeRO-1)
    whole = run("megatron", tp=2, dp=16, zero_stage=1).stages[0].memory_gb
    for group, factor in ((8, 2), (4, 4), (2, 8)):
        part = run("megatron", tp=2, dp=16, zero_stage=1, shard_group=group).stages[0].memory_gb
        assert part.optimizer == pytest.approx(factor * whole.optimizer)
        assert (part.weights, part.gradients) == (whole.weights, whole.gradients)
    # torchtitan HSDP (ZeRO-3): weights, gradients and optimizer states all sharded
    full = run("torchtitan", tp=2, dp=16, zero_stage=3).stages[0].memory_gb
    hsdp = run("torchtitan", tp=2, dp=16, zero_stage=3, shard_group=4).stages[0].memory_gb
    for part in ("weights", "gradients", "optimizer", "embedding_lm_head"):
        assert getattr(hsdp, part) == pytest.approx(4 * getattr(full, part)), part


def test_hpz_adds_a_secondary_bf16_partition_of_the_weights() -> None:
    full = run("deepspeed", dp=32, zero_stage=3).stages[0].memory_gb
    hpz = run("deepspeed", dp=32, zero_stage=3, shard_group=8, shard_scope="weights").stages[0].memory_gb
    params = LLAMA8B.num_layers * LLAMA8B.dense_layer_params + LLAMA8B.embedding_params + LLAMA8B.lm_head_params
    assert hpz.weights - full.weights == pytest.approx(2 * params / 8 / 1e9, rel=1e-6)
    assert (hpz.gradients, hpz.optimizer) == (full.gradients, full.optimizer)


def test_a_node_local_group_runs_on_nvlink_and_only_the_replicas_cross_the_network() -> None:
    tiers = net.cluster_tiers(FOUR_NODES, FOUR_NODES.pools[0])
    inside = sharded_groups(ParallelConfig(tp=2, dp=16, zero_stage=1, shard_group=4), tiers, 1e9, 0.0, 4, False, True)
    assert [lv.name for lv in inside.dense_levels] == ["nvlink"] and inside.dense_ranks == 4
    assert [lv.name for lv in inside.dense_replica_levels] == ["network"]
    assert inside.dense_replica_levels[0].members == 4
    across = sharded_groups(ParallelConfig(tp=2, dp=16, zero_stage=1, shard_group=8), tiers, 1e9, 0.0, 4, False, True)
    assert [lv.name for lv in across.dense_levels] == ["nvlink", "network"]
    # the replicas all-reduce 1/ranks of the gradients: a group twice as large sends half as much per replica set
    whole = sharded_groups(ParallelConfig(tp=2, dp=16, zero_stage=1), tiers, 1e9, 0.0, 4, False, True)
    assert not whole.replicated and replica_reduce(whole) == 0.0
    assert replica_reduce(inside) == pytest.approx(net.all_reduce(inside.dense_replica_levels, 1e9 * 4 / 4), rel=1e-12)


def test_mics_inside_a_node_takes_zero3_off_the_network() -> None:
    # DeepSpeed's ZeRO-3 gathers do not aggregate per node (each rank's volume over its own NIC); MiCS inside a
    # node gathers and reduce-scatters over NVLink and all-reduces 1/8 of the gradients once per step.
    flat = run("deepspeed", dp=32, zero_stage=3, recompute="full").breakdown.zero_gather
    mics = run("deepspeed", dp=32, zero_stage=3, recompute="full", shard_group=8).breakdown.zero_gather
    hpz = run("deepspeed", dp=32, zero_stage=3, recompute="full", shard_group=8, shard_scope="weights")
    assert mics < 0.5 * flat
    assert mics < hpz.breakdown.zero_gather < flat  # hpZ keeps the forward gathers and reduce-scatters global


def _zero3_stage_time(every_microbatch: bool, gbs: int) -> float:
    w = TrainingWorkload(global_batch_size=gbs, seq_len=4096, framework="torchtitan")
    c = ParallelConfig(tp=2, dp=16, zero_stage=3, shard_group=4, recompute="full")
    ctx = CostContext(LLAMA8B, FOUR_NODES, w, c, gbs // 16)
    ctx.rt = dataclasses.replace(ctx.rt, replica_reduce_every_microbatch=every_microbatch)
    return stage_cost(ctx, True, True, 0, LLAMA8B.num_layers, FOUR_NODES.pools[0], None).zero


def test_replicas_all_reduce_every_micro_batch_or_once_per_step() -> None:
    # FSDP2 all-reduces the reduce-scatter output after every backward, MiCS and Megatron-FSDP after the last
    assert _zero3_stage_time(True, 16) == pytest.approx(_zero3_stage_time(False, 16))  # one micro-batch
    assert _zero3_stage_time(True, 64) > _zero3_stage_time(False, 64)  # four


def test_the_replica_all_reduce_adds_to_the_reduce_pass() -> None:
    tiers = net.cluster_tiers(FOUR_NODES, FOUR_NODES.pools[0])
    g = sharded_groups(ParallelConfig(tp=2, dp=16, zero_stage=3, shard_group=4), tiers, 4e9, 0.0, 4, False, True)
    schedule = Zero3Schedule(collectives_per_layer=1, node_aggregation=True, overlap=1.0)
    # no compute to hide under: every collective is paid, each layer's share of the replicas' all-reduce on top
    # (n layers, and the last layer's reduction has nothing to hide under)
    bare = zero3_exposed(g, schedule, 32, 0.0, 0.0)
    assert zero3_exposed(g, schedule, 32, 0.0, 0.0, replica_reduce_now=True) == pytest.approx(
        bare + replica_reduce(g) * (1 + 1 / 32), rel=1e-9
    )


def test_records_without_a_shard_group_price_as_before() -> None:
    # shard_group None and shard_group = dp are the same configuration, priced identically
    a = run("torchtitan", tp=2, dp=16, zero_stage=3)
    b = run("torchtitan", tp=2, dp=16, zero_stage=3, shard_group=16)
    assert a.step_time_s == b.step_time_s and a.peak_memory_gb == b.peak_memory_gb
