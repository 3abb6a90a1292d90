"""Goodput as runs lose it (issue 46 §1, issue 48 item 5): hours lost by part that add up to their total, an
interval the storage can absorb and at least one step, a fixed interval with the optimum beside it, detection by
failure kind, recovery modes, checkpoint tiers, and the 80% band."""

from __future__ import annotations

import pytest

from optimizer.costmodel.estimate import estimate
from optimizer.costmodel.goodput import detection_seconds, failure_model
from optimizer.costmodel.result import Goodput
from optimizer.spec.cluster_loading import load_cluster_preset
from optimizer.spec.cluster_spec import ClusterSpec
from optimizer.spec.model_loading import load_model_preset
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.reliability import DEFAULT_SPREAD, PoolReliability
from optimizer.spec.workload import TrainingWorkload

L405 = load_model_preset("llama-3.1-405b")
L8 = load_model_preset("llama-3-8b")
W405 = TrainingWorkload(global_batch_size=256, seq_len=8192)
C405 = ParallelConfig(tp=8, pp=8, dp=4)
W8 = TrainingWorkload(global_batch_size=64, seq_len=4096)
C8 = ParallelConfig(tp=8, pp=1, dp=4)


def _cluster(preset: str, **reliability: object) -> ClusterSpec:
    c = load_cluster_preset(preset)
    base = PoolReliability()
    rate = reliability.pop("failure_rate", None)
    rel = base.model_copy(update=reliability)
    if rate is not None:
        rel = rel.with_total_rate(float(rate))  # type: ignore[arg-type]
    return c.model_copy(update={"pools": [c.pools[0].model_copy(update={"reliability": rel})]})


def _goodput(preset: str, model: str = "405", **reliability: object) -> Goodput:
    m, w, cfg = (L405, W405, C405) if model == "405" else (L8, W8, C8)
    g = estimate(m, _cluster(preset, **reliability), w, cfg).goodput
    assert g is not None
    return g


def _parts(g: Goodput) -> float:
    return (
        g.checkpoint_h_per_day
        + g.rework_h_per_day
        + g.detection_h_per_day
        + g.restart_h_per_day
        + g.warmup_h_per_day
        + g.planned_h_per_day
        + g.slowdown_h_per_day
    )


@pytest.mark.parametrize(
    "reliability",
    [
        {"failure_rate": 100.0},  # issue 48 item 5's example: "6.01 h (checkpoints 0.01, rework 0.03, restarts 7.96)"
        {"failure_rate": 1000.0},
        {"failure_rate": 3000.0, "recovery": "manual"},
        {"checkpoint_tier": "local", "failure_rate": 300.0},
        {"checkpoint_tier": "memory", "maintenance_h_per_week": 4.0, "eval_pause_share": 0.02},
    ],
)
def test_the_hours_lost_add_up_to_their_total(reliability: dict[str, object]) -> None:
    g = _goodput("dgx-h100:32", **reliability)
    assert _parts(g) == pytest.approx(g.lost_h_per_day, abs=0.006)  # the parts as printed (2 decimals) sum up
    assert g.lost_h_per_day == pytest.approx(24 * (1 - g.fraction), rel=1e-9)
    assert 0 <= g.lost_h_per_day <= 24


@pytest.mark.parametrize("rate", [100.0, 1000.0, 3000.0])
def test_the_interval_is_one_the_storage_absorbs_and_at_least_one_step(rate: float) -> None:
    # 5.7 TB from 32 nodes at 10 GB/s each: 17.8 s of writing; at most a quarter of the bandwidth (the default
    # checkpoint_bandwidth_share) means one save per 71 s at the most, never one every 18 s.
    g = _goodput("dgx-h100:32", failure_rate=rate)
    assert g.interval_s >= g.write_s / PoolReliability().checkpoint_bandwidth_share * 0.9999
    step = g.wall_s_per_step * g.fraction
    assert g.interval_s >= step * 0.9999 and g.interval_steps >= 1
    # The storage's aggregate bounds it too: a 100 GB/s file system takes 5.7 TB in 57 s, so 227 s at a quarter.
    slow = _goodput("dgx-h100:32", failure_rate=rate, storage_write_gbytes_per_s=100.0)
    assert slow.interval_s >= 5681.9 / 100.0 / 0.25


def test_a_fixed_interval_runs_as_given_with_the_optimum_beside_it() -> None:
    free = _goodput("dgx-h100:32", model="405")
    fixed = _goodput("dgx-h100:32", checkpoint_interval_s=3 * 3600.0)
    assert fixed.interval_fixed and not free.interval_fixed
    assert fixed.interval_s == 3 * 3600.0 and fixed.optimal_interval_s == pytest.approx(free.interval_s)
    assert fixed.fraction < free.fraction  # the optimum is the optimum
    # Below one step, a save still comes at a step's end.
    tiny = _goodput("dgx-h100:32", checkpoint_interval_s=1.0)
    assert tiny.interval_s >= tiny.wall_s_per_step * tiny.fraction * 0.9999


def test_detection_follows_the_failure_kind_and_the_collective_timeout() -> None:
    assert detection_seconds(0.0, 0.0, 30.0, 600.0, 3600.0) == 30.0
    assert detection_seconds(1.0, 0.0, 30.0, 600.0, 3600.0) == 600.0
    assert detection_seconds(0.2, 0.1, 30.0, 600.0, 3600.0) == pytest.approx(0.7 * 30 + 0.2 * 600 + 0.1 * 3600)
    short = _goodput("dgx-h100:32", failure_rate=300.0, collective_timeout_s=60.0)
    long = _goodput("dgx-h100:32", failure_rate=300.0, collective_timeout_s=1800.0)
    assert long.detection_s - short.detection_s == pytest.approx(0.2 * (1800 - 60))
    assert long.detection_h_per_day > short.detection_h_per_day and long.fraction < short.fraction


def test_recovery_modes_order_manual_automatic_elastic() -> None:
    f = {
        m: _goodput("dgx-h100:32", failure_rate=300.0, recovery=m).fraction for m in ("manual", "automatic", "elastic")
    }
    assert f["manual"] < f["automatic"] < f["elastic"]
    manual = _goodput("dgx-h100:32", failure_rate=300.0, recovery="manual")
    auto = _goodput("dgx-h100:32", failure_rate=300.0)
    assert manual.restart_s - auto.restart_s == pytest.approx(PoolReliability().manual_response_s)


def test_checkpoint_tiers_and_their_recovery_paths() -> None:
    cluster = _cluster("dgx-h100:4", failure_rate=300.0, checkpoint_write_gbytes_per_s_per_node=0.1)
    remote = failure_model(L8, cluster, W8, C8, step_s=1.0)
    local = failure_model(
        L8,
        _cluster("dgx-h100:4", failure_rate=300.0, checkpoint_write_gbytes_per_s_per_node=0.1, checkpoint_tier="local"),
        W8,
        C8,
        step_s=1.0,
    )
    memory = failure_model(
        L8,
        _cluster(
            "dgx-h100:4", failure_rate=300.0, checkpoint_write_gbytes_per_s_per_node=0.1, checkpoint_tier="memory"
        ),
        W8,
        C8,
        step_s=1.0,
    )
    # A slow remote file system: the local disk and the peer's memory let the job save more often ...
    assert memory.interval_s < remote.interval_s and local.interval_s < remote.interval_s
    # ... and a memory checkpoint comes back from the peer after a node is lost, faster than the remote load.
    assert memory.load_s < remote.load_s and memory.fraction > remote.fraction
    # The local tier loses a failed node's copy: hardware failures roll back to the last remote copy.
    assert local.rework_s > local.interval_s / 2


def test_non_hardware_interruptions_and_slow_periods_cost_their_share() -> None:
    base = _goodput("dgx-h100:32", loss_spikes_per_day=0.0, slowdown_share=0.0, planned_restarts_per_day=0.0)
    spikes = _goodput(
        "dgx-h100:32", loss_spikes_per_day=1.0, rollback_s=7200.0, slowdown_share=0.0, planned_restarts_per_day=0.0
    )
    assert spikes.rework_h_per_day - base.rework_h_per_day == pytest.approx(2.0, rel=0.1)  # one 2 h rollback a day
    slow = _goodput("dgx-h100:32", loss_spikes_per_day=0.0, slowdown_share=0.1, planned_restarts_per_day=0.0)
    assert slow.fraction == pytest.approx(0.9 * base.fraction, rel=1e-6)
    maint = _goodput(
        "dgx-h100:32",
        loss_spikes_per_day=0.0,
        slowdown_share=0.0,
        planned_restarts_per_day=0.0,
        maintenance_h_per_week=16.8,
    )
    assert maint.fraction == pytest.approx(0.9 * base.fraction, rel=1e-6)


def test_the_band_holds_the_point_and_narrows_with_a_measured_spread() -> None:
    g = _goodput("dgx-h100:32", failure_rate=300.0)
    assert g.fraction_interval is not None and g.useful_tokens_per_s_interval is not None
    lo, hi = g.fraction_interval
    assert lo < g.fraction <= hi and hi - lo > 0.02
    assert g.lost_h_per_day_interval is not None
    assert g.lost_h_per_day_interval[0] <= g.lost_h_per_day <= g.lost_h_per_day_interval[1]
    narrow = {k: (0.95, 1.05) for k in DEFAULT_SPREAD}
    n = _goodput("dgx-h100:32", failure_rate=300.0, spread=narrow)
    assert n.fraction_interval is not None
    assert n.fraction_interval[1] - n.fraction_interval[0] < 0.25 * (hi - lo)


def test_bad_spread_and_shares_name_the_field() -> None:
    with pytest.raises(ValueError, match=r"reliability\.spread\.failure_rat"):
        PoolReliability(spread={"failure_rat": (0.5, 2.0)})
    with pytest.raises(ValueError, match=r"reliability\.spread\.launch_s"):
        PoolReliability(spread={"launch_s": (2.0, 3.0)})
    with pytest.raises(ValueError, match="silent_share"):
        PoolReliability(hang_share=0.8, silent_share=0.3)
