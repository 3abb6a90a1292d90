"""The goodput objective (issue 36 §1): wall seconds per useful step, which may leave nodes free as spares."""

from __future__ import annotations

import numpy as np
import pytest

from optimizer.search.planner import plan
from optimizer.spec.cluster_loading import load_cluster_preset
from optimizer.spec.cluster_spec import ClusterSpec
from optimizer.spec.model_loading import load_model_preset
from optimizer.spec.objectives import WALL_PER_USEFUL_STEP, format_objective
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.reliability import DEFAULT_SPREAD, PoolReliability
from optimizer.spec.workload import TrainingWorkload

LLAMA8B = load_model_preset("llama-3-8b")


def _cluster(per_1000_node_days: float, **fields: object) -> ClusterSpec:
    c = load_cluster_preset("dgx-h100:4")
    rel = PoolReliability.model_validate(fields).with_total_rate(per_1000_node_days)
    return c.model_copy(update={"pools": [c.pools[0].model_copy(update={"reliability": rel})]})


def _w(objective: str) -> TrainingWorkload:
    return TrainingWorkload.model_validate({"global_batch_size": 64, "seq_len": 4096, "objective": objective})


def _spare_cluster(spread: dict[str, tuple[float, float]]) -> ClusterSpec:
    c = load_cluster_preset("dgx-h100:8")
    rel = PoolReliability.model_validate({"node_repair_s": 8 * 3600.0, "spread": spread}).with_total_rate(500.0)
    return c.model_copy(update={"pools": [c.pools[0].model_copy(update={"reliability": rel})]})


def _w60(objective: str) -> TrainingWorkload:
    return TrainingWorkload.model_validate({"global_batch_size": 60, "seq_len": 4096, "objective": objective})


def test_a_gain_inside_its_band_keeps_the_step_time_plan() -> None:
    # The same cluster, unmeasured, its failure rate known only within a quarter to three times 500 (repairs of 2
    # to 32 h): the spare-node plan gains +24% at the point values but -4.7% at the band's low end, so the
    # step-time plan stays. (With the default half-to-three-times range the goodput search's pick, tp4 dp12 since
    # headroom no longer buys the slower tp8 dp6 [issue 53 §3], gains +1.8% at its band's low end: it is kept.)
    good = plan(LLAMA8B, _spare_cluster({"failure_rate": (0.25, 3.0)}), _w60("goodput"), time_limit_s=10)
    assert good.plan is not None and good.plan.config.gpus == 64 - 4 and good.status == "FEASIBLE"
    assert "gain inside its band" in good.explanation.summary
    g = good.plan.estimate.goodput
    assert g is not None and good.objective_value == pytest.approx(g.wall_s_per_step)


def test_a_high_failure_rate_leaves_a_node_spare() -> None:
    # 0.5 interruptions per node-day (about 130x Llama 3's) on 8 nodes, 8 h to repair one. Without a free node
    # the job runs its checkpoint-compatible fallback until the repair: 60 replicas less a node's 8 is 52, which
    # does not divide the batch of 60, so 30 run, at half rate. Two spare nodes serve most failures at once.
    # The cluster has measured its rates (issue 46 §2: its history narrows their ranges to +-10%), so the gain holds
    # across the band; test_a_gain_inside_its_band_keeps_the_step_time_plan is the same cluster unmeasured.
    cluster = _spare_cluster({k: (0.9, 1.1) for k in DEFAULT_SPREAD})
    w = _w60
    fast = plan(LLAMA8B, cluster, w("step_time"), time_limit_s=30)
    good = plan(LLAMA8B, cluster, w("goodput"), time_limit_s=30)
    assert fast.plan is not None and good.plan is not None
    gf, gp = fast.plan.estimate.goodput, good.plan.estimate.goodput
    assert gf is not None and gp is not None
    assert gf.spare_nodes == 0 and good.plan.config.gpus < fast.plan.config.gpus and gp.spare_nodes >= 1
    assert good.plan.estimate.step_time_s > fast.plan.estimate.step_time_s  # slower per step ...
    assert gp.useful_tokens_per_s > 1.1 * gf.useful_tokens_per_s  # ... and more useful tokens per second
    assert good.objective == WALL_PER_USEFUL_STEP
    assert good.objective_value == pytest.approx(gp.wall_s_per_step, abs=1e-5)  # CP-SAT: integer nanoseconds
    assert good.lower_bound is not None and good.objective_value is not None
    assert good.lower_bound <= good.objective_value
    assert "Goodput chose" in good.explanation.summary and "spare nodes against 0" in good.explanation.summary
    assert format_objective(WALL_PER_USEFUL_STEP, 1.5) == "1.5 s per useful step"


def test_at_the_published_rate_goodput_keeps_every_gpu() -> None:
    cluster = _cluster(1000 * 419 / (54 * 2048))  # Llama 3's unexpected interruptions per node-day
    good = plan(LLAMA8B, cluster, _w("goodput"), time_limit_s=30)
    assert good.plan is not None and good.plan.config.gpus == 32
    # The goodput search's own pick, if it differs, gains nothing across the band: the step-time optimum stays.
    s = good.explanation.summary
    assert "changes nothing against the step-time optimum" in s or "Kept the step-time optimum" in s


def test_held_spares_are_left_out_of_the_plan() -> None:
    cluster = _cluster(1000 * 419 / (54 * 2048), spare_nodes=1)
    fast = plan(LLAMA8B, cluster, _w("step_time"), time_limit_s=30)
    assert fast.plan is not None and fast.plan.config.gpus <= 24
    assert fast.plan.estimate.goodput is not None and fast.plan.estimate.goodput.spare_nodes >= 1


def test_slow_storage_picks_a_layout_with_cheaper_checkpoints() -> None:
    # DeepSpeed saves synchronously and writes the weights from data-parallel rank 0 of each model-parallel group:
    # at 0.2 GB/s per node a layout with tensor parallelism spreads that write over more ranks.
    cluster = _cluster(300.0, checkpoint_write_gbytes_per_s_per_node=0.2, checkpoint_read_gbytes_per_s_per_node=0.2)
    w = TrainingWorkload(global_batch_size=64, seq_len=4096, framework="deepspeed")
    fast = plan(LLAMA8B, cluster, w, time_limit_s=30, interval_rule=False)
    good = plan(LLAMA8B, cluster, w.model_copy(update={"objective": "goodput"}), time_limit_s=30, interval_rule=False)
    assert fast.plan is not None and good.plan is not None
    gf, gp = fast.plan.estimate.goodput, good.plan.estimate.goodput
    assert gf is not None and gp is not None and not gp.async_save
    assert gp.blocking_s < 0.8 * gf.blocking_s and gp.useful_tokens_per_s > gf.useful_tokens_per_s
    assert good.plan.estimate.step_time_s >= fast.plan.estimate.step_time_s
    assert "a checkpoint blocks" in good.explanation.summary


@pytest.mark.parametrize("recovery", ["automatic", "elastic", "manual"])
def test_the_goodput_floor_is_a_bound_on_every_candidate(recovery: str) -> None:
    # The branch and bound prunes on goodput_floor: it must never exceed a candidate's own 1 / fraction, elastic
    # recovery (60 s, shorter than a relaunch) included.
    from optimizer.search.planner import TrainingSearch, TrainingSpace
    from optimizer.search.space import SearchSpace

    cluster = _cluster(300.0, recovery=recovery)
    ts = TrainingSpace(LLAMA8B, cluster, _w("goodput"), SearchSpace())
    search = TrainingSearch(ts, 1, 1.0, None, None, False, (), False)
    for tp, dp in ((8, 4), (4, 8), (8, 1), (2, 2)):
        cfg = ParallelConfig(tp=tp, pp=1, dp=dp)
        rate = search.goodput_rate(cfg, (cluster.pools[0].name,))
        floor = float(search.goodput_floor(np.array([cfg.gpus]))[0])
        assert 1.0 < floor <= rate, (tp, dp, floor, rate)
