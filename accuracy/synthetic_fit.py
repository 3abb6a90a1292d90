"""Synthetic but honest checks of per-cluster calibration: runs priced by the cost model under hidden constants,
with log-normal noise, on random configurations that fit [issue 14]. Used by tests and benchmarks/calibration.py."""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass

from optimizer.calibration.fit import FitPoint, fit_calibration
from optimizer.costmodel.estimate import estimate
from optimizer.errors import DomainError
from optimizer.spec.calibration import ClusterCalibration
from optimizer.spec.cluster_spec import ClusterSpec
from optimizer.spec.model_spec import ModelSpec
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import TrainingWorkload


@dataclass(frozen=True)
class SyntheticRun:
    config: ParallelConfig
    true_step_s: float


def random_configs(
    model: ModelSpec, cluster: ClusterSpec, w: TrainingWorkload, n: int, rng: random.Random
) -> list[ParallelConfig]:
    """`n` distinct valid configurations that fit in memory, of every size from one node to the whole pool."""
    pool = cluster.pools[0]
    gpn, total = pool.gpus_per_node, pool.healthy_gpus
    seen: set[ParallelConfig] = set()
    out: list[ParallelConfig] = []
    tries = 0
    while len(out) < n and tries < 200 * n:
        tries += 1
        gpus = rng.choice([g for g in (gpn // 2, gpn, 2 * gpn, 4 * gpn, 8 * gpn) if 1 <= g <= total])
        tp = rng.choice([t for t in (1, 2, 4, 8) if t <= min(gpn, gpus)])
        pp = rng.choice([p for p in (1, 2, 4) if tp * p <= gpus and model.num_layers % p == 0])
        dp = gpus // (tp * pp)
        if dp < 1 or w.global_batch_size % dp:
            continue
        mbs = rng.choice([m for m in (1, 2, 4) if (w.global_batch_size // dp) % m == 0])
        cfg = ParallelConfig(
            tp=tp,
            pp=pp,
            dp=dp,
            mbs=mbs,
            zero_stage=rng.choice([0, 1]),
            sequence_parallel=tp > 1,
            tp_comm_overlap=tp > 1 and rng.random() < 0.5,
            recompute=rng.choice(["none", "selective", "full"]),
            overlap_grad_reduce=rng.random() < 0.7,
        )
        if cfg in seen:
            continue
        try:
            est = estimate(model, cluster, w, cfg, goodput_band=False)
        except DomainError:
            continue
        if est.feasible:
            seen.add(cfg)
            out.append(cfg)
    return out


def synthetic_points(
    model: ModelSpec,
    cluster: ClusterSpec,
    w: TrainingWorkload,
    configs: list[ParallelConfig],
    truth: ClusterCalibration,
    noise: float,
    rng: random.Random,
) -> list[FitPoint]:
    """Measured runs: the cost model under `truth`, times a log-normal noise of spread `noise`."""
    hidden = cluster.with_calibration(truth)
    points = []
    for i, cfg in enumerate(configs):
        t = estimate(model, hidden, w, cfg, goodput_band=False).step_time_s
        assert t is not None
        points.append(FitPoint(f"run {i}", model, cluster, w, cfg, step_time_s=t * math.exp(rng.gauss(0, noise))))
    return points


def median_error(points: list[FitPoint], cal: ClusterCalibration | None) -> float:
    """Median |predicted / measured - 1| of `points`' step times, each priced on its own cluster with `cal`."""
    errs = []
    for p in points:
        t = estimate(p.model, p.cluster.with_calibration(cal), p.workload, p.config, goodput_band=False).step_time_s
        assert t is not None and p.step_time_s is not None
        errs.append(abs(t / p.step_time_s - 1))
    return statistics.median(errs)


@dataclass(frozen=True)
class SourceCheck:
    """Leave-one-out calibration on one published source, treated as one cluster's measurements."""

    group: str
    runs: int
    median_before: float
    median_after: float


def leave_one_out(points: list[FitPoint]) -> tuple[float, float]:
    """(median |error| uncalibrated, median |error| when each run is predicted by a calibration fitted to the
    others)."""
    before, after = [], []
    for i, p in enumerate(points):
        others = points[:i] + points[i + 1 :]
        cal = fit_calibration(others).calibration
        assert p.step_time_s is not None
        b = estimate(p.model, p.cluster, p.workload, p.config).step_time_s
        a = estimate(p.model, p.cluster.with_calibration(cal), p.workload, p.config).step_time_s
        assert a is not None and b is not None
        before.append(abs(b / p.step_time_s - 1))
        after.append(abs(a / p.step_time_s - 1))
    return statistics.median(before), statistics.median(after)


def per_source(min_runs: int = 3) -> list[SourceCheck]:
    """Leave-one-out on every published source (calibration group) with at least `min_runs` priced step times."""
    from accuracy.published_runs import run_all

    groups: dict[str, list[FitPoint]] = {}
    for case in run_all():
        if case.run is not None:
            groups.setdefault(case.group, []).append(case.run)
    out = []
    for group, pts in sorted(groups.items()):
        if len(pts) >= min_runs:
            b, a = leave_one_out(pts)
            out.append(SourceCheck(group, len(pts), b, a))
    return out
