"""A cluster with its own measured runs narrows the step-time interval from what its calibration fit left
unexplained; with no runs (or runs too noisy to help) the interval is the published-run one and says so."""

from __future__ import annotations

import math
import random

import pytest

from accuracy.synthetic_fit import random_configs, synthetic_points
from optimizer.calibration.fit import fit_calibration
from optimizer.costmodel.estimate import estimate
from optimizer.costmodel.uncertainty import cluster_interval
from optimizer.spec.calibration import ClusterCalibration, PoolCalibration
from optimizer.spec.cluster_loading import load_cluster_preset
from optimizer.spec.model_loading import load_model_preset
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import TrainingWorkload

MODEL = load_model_preset("llama-3-8b")
CLUSTER = load_cluster_preset("dgx-h100:2")
W = TrainingWorkload(global_batch_size=64, seq_len=4096)
CFG = ParallelConfig(tp=1, pp=1, dp=16)


def _width(interval: tuple[float, float] | None) -> float:
    assert interval is not None
    return interval[1] / interval[0]


def test_without_runs_the_interval_is_the_published_one() -> None:
    e = estimate(MODEL, CLUSTER, W, CFG)
    assert e.interval_basis is not None and "left-out published runs" in e.interval_basis
    assert cluster_interval(e.step_time_s, None) is None
    too_few = ClusterCalibration(run_residuals=(0.01, -0.01), fitted_constants=1)  # one degree of freedom left
    assert cluster_interval(e.step_time_s, too_few) is None


def test_consistent_runs_narrow_the_interval_and_noisy_ones_do_not() -> None:
    published = estimate(MODEL, CLUSTER, W, CFG)
    tight = ClusterCalibration(
        version=3, run_residuals=(0.01, -0.012, 0.004, -0.006, 0.009, -0.003), fitted_constants=1
    )
    e = estimate(MODEL, CLUSTER.with_calibration(tight), W, CFG)
    assert _width(e.step_time_interval_s) < _width(published.step_time_interval_s)
    assert e.interval_basis is not None and "6 of this cluster's measured runs (calibration 3" in e.interval_basis
    lo, hi = e.step_time_interval_s or (0.0, 0.0)
    assert lo < e.step_time_s < hi
    # by hand: t(0.9, 5) = 1.476, s of the six residuals, sqrt(1 + 1/6)
    res = tight.run_residuals
    mean = sum(res) / 6
    sd = math.sqrt(sum((r - mean) ** 2 for r in res) / 5)
    assert math.log(hi / e.step_time_s) - mean == pytest.approx(1.476 * sd * math.sqrt(7 / 6), rel=1e-3)

    noisy = ClusterCalibration(run_residuals=(0.4, -0.5, 0.3, -0.35, 0.45), fitted_constants=1)
    n = estimate(MODEL, CLUSTER.with_calibration(noisy), W, CFG)
    assert n.step_time_interval_s == published.step_time_interval_s
    assert n.interval_basis is not None and "give a wider interval, not used" in n.interval_basis


def test_the_fit_records_what_its_runs_leave_unexplained() -> None:
    rng = random.Random(7)
    pool = CLUSTER.pools[0].name
    truth = ClusterCalibration(pools={pool: PoolCalibration(compute=0.85)})
    configs = random_configs(MODEL, CLUSTER, W, 8, rng)
    report = fit_calibration(synthetic_points(MODEL, CLUSTER, W, configs, truth, 0.02, rng))
    cal = report.calibration
    kept = [r for r in report.runs if not r.outlier]
    assert len(cal.run_residuals) == len(kept) >= 6 and cal.fitted_constants >= 1
    assert all(abs(r) < 0.1 for r in cal.run_residuals)  # 2% noise: what is left is small
    assert cal.run_residuals[0] == math.log(kept[0].measured_s / kept[0].after_s)
