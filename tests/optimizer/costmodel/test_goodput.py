"""Goodput (optimizer/costmodel/goodput.py): checkpoint size and sharding, Young / Daly's interval, spare nodes,
and Llama 3 405B's reported effective training time from its reported interruption rate."""

from __future__ import annotations

import itertools
import math

import pytest

from accuracy.published_runs import load_records, pinned_setting
from optimizer.costmodel.estimate import estimate
from optimizer.costmodel.goodput import (
    checkpoint_bytes,
    daly_interval,
    degraded_share,
    failure_model,
    goodput_fraction,
    largest_rank_share,
    repair_cost,
    wait_probability,
)
from optimizer.errors import DomainError
from optimizer.spec.cluster_loading import load_cluster_preset
from optimizer.spec.cluster_spec import ClusterSpec, NodePool
from optimizer.spec.model_loading import load_model_preset
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.reliability import L3_NODE_DAYS, PoolReliability
from optimizer.spec.workload import TrainingWorkload

LLAMA8B = load_model_preset("llama-3-8b")


def _with(cluster: ClusterSpec, nodes: int | None = None, **reliability: object) -> ClusterSpec:
    pool = cluster.pools[0]
    update: dict[str, object] = {"reliability": PoolReliability.model_validate(reliability)}
    if nodes is not None:
        update["nodes"] = nodes
    return cluster.model_copy(update={"pools": [pool.model_copy(update=update)]})


def test_checkpoint_holds_weights_and_adam_state() -> None:
    m = load_model_preset("llama-3.1-405b")
    w, o = checkpoint_bytes(m, TrainingWorkload(global_batch_size=8, seq_len=8192))
    assert w == pytest.approx(2 * m.num_parameters) and o == pytest.approx(12 * m.num_parameters)
    assert 5.5e12 < w + o < 5.8e12  # 405B parameters x 14 B: the "5 TB checkpoint" of issue 36
    _, o_pa = checkpoint_bytes(m, TrainingWorkload(global_batch_size=8, seq_len=8192, precision_aware_optimizer=True))
    assert o_pa == pytest.approx(10 * m.num_parameters)


def test_deepspeed_without_zero_writes_from_one_replica() -> None:
    c = ParallelConfig(tp=2, pp=1, dp=8, zero_stage=0)
    spread = largest_rank_share(2.0, 12.0, c, "megatron")
    assert spread == pytest.approx(14.0 / 16)
    assert largest_rank_share(2.0, 12.0, c, "deepspeed") == pytest.approx(14.0 / 2)  # tp ranks of dp rank 0
    z1 = ParallelConfig(tp=2, pp=1, dp=8, zero_stage=1)
    assert largest_rank_share(2.0, 12.0, z1, "deepspeed") == pytest.approx(2.0 / 2 + 12.0 / 16)


def test_daly_interval_maximises_the_fraction_and_starts_from_young() -> None:
    m, r = 3 * 3600.0, 600.0
    for delta in (1.0, 30.0, 300.0):
        tau = daly_interval(delta, m)
        assert tau == pytest.approx((2 * delta * m) ** 0.5, rel=0.15)  # Young's first term dominates

        def f(t: float, d: float = delta) -> float:
            return goodput_fraction(d, t, m, r, (t + d) / 2)

        assert f(tau) >= max(f(0.7 * tau), f(1.4 * tau))
    assert daly_interval(3 * m, m) == m


def test_spare_nodes_cut_the_wait_for_a_repaired_node() -> None:
    assert wait_probability(0.5, 0) == 1.0
    probs = [wait_probability(0.5, s) for s in range(5)]
    assert all(a > b for a, b in itertools.pairwise(probs))
    assert probs[4] == pytest.approx(1 - math.exp(-0.5) * (1 + 0.5 + 0.5**2 / 2 + 0.5**3 / 6))  # P(Poisson >= 4)
    w = TrainingWorkload(global_batch_size=64, seq_len=4096)
    cfg = ParallelConfig(tp=8, pp=1, dp=4)
    tight = failure_model(LLAMA8B, _with(load_cluster_preset("dgx-h100:4")), w, cfg)
    spare = failure_model(LLAMA8B, _with(load_cluster_preset("dgx-h100:4"), nodes=6), w, cfg)
    assert (tight.spares, spare.spares) == (0, 2)
    assert spare.restart_s < tight.restart_s - 3000 and spare.fraction > tight.fraction


def test_async_save_blocks_only_for_the_host_copy() -> None:
    cluster = _with(load_cluster_preset("dgx-h100:4"), checkpoint_write_gbytes_per_s_per_node=0.5)
    cfg = ParallelConfig(tp=8, pp=1, dp=4)
    sync = failure_model(
        LLAMA8B, cluster, TrainingWorkload(global_batch_size=64, seq_len=4096, framework="deepspeed"), cfg
    )
    asy = failure_model(
        LLAMA8B, cluster, TrainingWorkload(global_batch_size=64, seq_len=4096, framework="megatron"), cfg
    )
    assert not sync.async_save and asy.async_save
    assert sync.blocking_s == sync.write_s and asy.blocking_s < asy.write_s / 10
    assert asy.fraction > sync.fraction


def test_more_failures_lower_the_fraction_and_shorten_the_interval() -> None:
    w = TrainingWorkload(global_batch_size=64, seq_len=4096, framework="deepspeed")
    cfg = ParallelConfig(tp=8, pp=1, dp=4)
    # Loss spikes (a job-wide rate, not the nodes') off: the interval then follows the node failures alone.
    base = PoolReliability(loss_spikes_per_day=0.0)
    low = failure_model(LLAMA8B, _with(load_cluster_preset("dgx-h100:8"), loss_spikes_per_day=0.0), w, cfg)
    high = failure_model(
        LLAMA8B,
        _with(
            load_cluster_preset("dgx-h100:8"), **base.with_total_rate(4 * base.failures_per_1000_node_days).model_dump()
        ),
        w,
        cfg,
    )
    assert high.failures_per_day == pytest.approx(4 * low.failures_per_day)
    assert high.interval_s == pytest.approx(low.interval_s / 2, rel=0.1)  # sqrt(2 delta M)
    assert high.fraction < low.fraction


def test_bad_reliability_inputs_name_the_field() -> None:
    with pytest.raises(ValueError, match="gpu_failures_per_1000_node_days"):
        PoolReliability(gpu_failures_per_1000_node_days=0)
    with pytest.raises(ValueError, match="checkpoint_write_gbytes_per_s_per_node"):
        PoolReliability(checkpoint_write_gbytes_per_s_per_node=-1)
    pool = load_cluster_preset("dgx-h100:4").pools[0].model_dump()
    with pytest.raises((DomainError, ValueError), match=r"pools\.dgx-h100\.reliability\.spare_nodes"):
        NodePool.model_validate({**pool, "reliability": {"spare_nodes": 4}})
    assert NodePool.model_validate({**pool, "reliability": {"spare_nodes": 3}}).reliability_or_default.spare_nodes == 3


# Llama 3 405B pre-training [Dubey et al., arXiv 2407.21783]: 16,384 H100 (Table 4: tp 8, pp 16, dp 128), 466 job
# interruptions in 54 days, 419 of them unexpected (§3.3.4, Table 5), "more than 90% effective training time".
# The inputs the report does not give, with the range each may take:
# - failure rate: 419 (unexpected only) to 466 (planned ones too) interruptions over 54 x 2,048 node-days;
# - checkpoint write and read per node: 1 to 25 GB/s (one 200 Gb/s front-end NIC); storage aggregate 2 TB/s
#   sustained to 7 TB/s peak (§3.3.1);
# - launch (detection, teardown, scheduling, start): 2 to 10 minutes; NCCL initialisation 1 to 10 s per 1,000 GPUs
#   (MegaScale §3.5: under 30 s above 10,000 GPUs);
# - repair of a node: 30 min to 8 h; hot spares: 16 to 1,024 nodes (the job ran on 2,048 of a 24,576-GPU cluster,
#   3,072 nodes: Meta, "Building Meta's GenAI infrastructure", March 2024).
# The terms of issue 46 take the report's own figures: its 47 planned interruptions as planned restarts (at 419) or
# counted as failures (at 466); hangs and silent failures in Table 5's shares (7 NCCL watchdog timeouts, 6 silent
# data corruptions of 419), automatic recovery ("all but 3" handled by automation); the rest at their defaults.
LLAMA_RANGES = {
    "interruptions": (419, 466),
    "node_gbps": (1.0, 25.0),
    "storage_gbps": (2000.0, 7000.0),
    "launch_s": (120.0, 600.0),
    "nccl": (1.0, 10.0),
    "repair_s": (1800.0, 8 * 3600.0),
    "spares": (16, 1024),
}


def _llama3_fraction(
    interruptions: float,
    node_gbps: float,
    storage_gbps: float,
    launch_s: float,
    nccl: float,
    repair_s: float,
    spares: float,
) -> float:
    rec = next(r for r in load_records() if r["id"] == "dubey2024_llama3_405b_16384_cp1")
    model, cluster, w, cfg = pinned_setting(rec)
    rel = PoolReliability(
        checkpoint_write_gbytes_per_s_per_node=node_gbps,
        checkpoint_read_gbytes_per_s_per_node=node_gbps,
        storage_write_gbytes_per_s=storage_gbps,
        storage_read_gbytes_per_s=storage_gbps,
        launch_s=launch_s,
        nccl_init_s_per_1000_gpus=nccl,
        node_repair_s=repair_s,
        planned_restarts_per_day=47 / 54 if interruptions < 466 else 0.0,
        hang_share=7 / 419,
        silent_share=6 / 419,
    ).with_total_rate(1000 * interruptions / L3_NODE_DAYS)
    pool = cluster.pools[0].model_copy(update={"nodes": 2048 + int(spares), "reliability": rel})
    est = estimate(model, cluster.model_copy(update={"pools": [pool]}), w, cfg)
    assert est.goodput is not None and est.goodput.nodes == 2048 and est.goodput.spare_nodes == spares
    return est.goodput.ettr  # the report's "effective training time": slow periods count as training


def test_llama3_effective_training_time_from_its_interruption_rate() -> None:
    fractions = [_llama3_fraction(*corner) for corner in itertools.product(*LLAMA_RANGES.values())]
    assert min(fractions) > 0.90  # the report: "more than 90% effective training time"
    assert max(fractions) < 0.99  # and failures still cost the run visibly
    # Outside the range: a 20-minute relaunch at the full rate, or no spare node (the job then runs a smaller
    # data-parallel fallback until each repair), and 90% is out of reach.
    assert _llama3_fraction(466, 10.0, 2000.0, 1200.0, 10.0, 3600.0, 64) < 0.90
    assert _llama3_fraction(419, 10.0, 2000.0, 300.0, 2.5, 3600.0, 0) < 0.90


def test_without_a_spare_the_job_runs_its_fallback_until_the_repair() -> None:
    # dgx-h100 nodes of 8 GPUs, tp 2: one lost node takes 4 of 32 data-parallel replicas; 28 does not divide a
    # batch of 256 at micro-batch 1, 16 does.
    w = TrainingWorkload(global_batch_size=256, seq_len=4096)
    pool = load_cluster_preset("dgx-h100:8").pools[0]
    c = ParallelConfig(tp=2, dp=32)
    assert degraded_share(w, c, pool.gpus_per_node) == pytest.approx(16 / 32)
    assert repair_cost(w, c, pool, 7200.0, 600.0) == pytest.approx(7200.0 * 0.5 + 600.0)
    assert repair_cost(w, c, pool, 900.0, 600.0) == 900.0  # a short repair: waiting beats a second restart
    odd = TrainingWorkload(global_batch_size=31, seq_len=4096)
    # 31 is prime: of the smaller degrees only 1 divides it, and one replica is not worth a second restart
    assert degraded_share(odd, ParallelConfig(tp=8, dp=31), 8) == pytest.approx(1 / 31)
    assert repair_cost(odd, ParallelConfig(tp=8, dp=31), pool, 7200.0, 600.0) == 7200.0
