"""The blind protocol for per-cluster calibration [issue 33 §5]: what one, two or three of a cluster's own runs do
to the prediction of its other runs, as a new user would see it.

Clusters. A "cluster group" is a set of runs on one kind of cluster with one software stack:
- each published source with 4+ priced step times (accuracy/data/published_runs.json; the cost model's own
  constants were fitted to these, so the uncalibrated error is in-sample);
- each (system, container) of Megatron-Bridge's performance summary with 4+ priced rows (accuracy/bridge_rows.py;
  nothing was fitted to these rows' errors: out of sample). Their rows are mostly one per model, so calibrating on
  some and predicting the others is a cross-model transfer by construction.

Protocol. For k = 1, 2, 3: every k-subset of a group's runs (or MAX_TRIALS of them, drawn with a fixed seed)
calibrates the cluster (optimizer/calibration/fit.py, exactly as the service does) and the group's other runs are
predicted with and without it. Across models: all runs of one model calibrate, every run of each other model of the
group is predicted. Errors are (predicted - measured) / measured.
"""

from __future__ import annotations

import itertools
import math
import random
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from optimizer.calibration.fit import FitPoint, fit_calibration
from optimizer.costmodel.estimate import estimate
from optimizer.spec.calibration import ClusterCalibration

# Subsets tried per group and k (all of them when there are fewer).
MAX_TRIALS = 12
MIN_RUNS = 4
SEED = 33

Fitter = Callable[[Sequence[FitPoint]], ClusterCalibration]


def default_fitter(points: Sequence[FitPoint]) -> ClusterCalibration:
    """The product's fit."""
    return fit_calibration(points).calibration


@dataclass(frozen=True)
class ClusterGroup:
    """Runs of one cluster and software stack."""

    name: str
    kind: str  # "published" (in-sample for the cost model) or "bridge" (out of sample)
    points: tuple[FitPoint, ...]


def cluster_groups(min_runs: int = MIN_RUNS) -> list[ClusterGroup]:
    """Every group with at least `min_runs` priced step times."""
    from accuracy.bridge_rows import priced_rows
    from accuracy.published_runs import run_all

    published: dict[str, list[FitPoint]] = {}
    for case in run_all():
        if case.run is not None:
            published.setdefault(case.group, []).append(case.run)
    bridge: dict[str, list[FitPoint]] = {}
    for rec, row in priced_rows():
        if row.point is not None:
            bridge.setdefault(f"bridge {rec['system']} {rec['container']}", []).append(row.point)
    groups = [ClusterGroup(k, "published", tuple(v)) for k, v in sorted(published.items())]
    groups += [ClusterGroup(k, "bridge", tuple(v)) for k, v in sorted(bridge.items())]
    return [g for g in groups if len(g.points) >= min_runs]


def _predict(p: FitPoint, cal: ClusterCalibration | None) -> float:
    t = estimate(p.model, p.cluster.with_calibration(cal), p.workload, p.config).step_time_s
    assert t is not None and p.step_time_s is not None
    return t / p.step_time_s - 1


@dataclass
class BlindScore:
    """Held-out errors of one group: uncalibrated and calibrated, one entry per (trial, held-out run)."""

    group: str
    kind: str
    k: int
    trials: int = 0
    before: list[float] = field(default_factory=list)
    after: list[float] = field(default_factory=list)

    @property
    def median_before(self) -> float:
        return statistics.median(abs(e) for e in self.before)

    @property
    def median_after(self) -> float:
        return statistics.median(abs(e) for e in self.after)

    @property
    def bias_after(self) -> float:
        """Median signed error after calibration (a uniform bias left over)."""
        return statistics.median(self.after)

    @property
    def bias_before(self) -> float:
        return statistics.median(self.before)

    @property
    def worse_points(self) -> float:
        """How much the calibration made the median |error| worse, in percentage points (negative: better)."""
        return 100 * (self.median_after - self.median_before)


def _subsets(n: int, k: int, rng: random.Random) -> list[tuple[int, ...]]:
    every = list(itertools.combinations(range(n), k))
    if len(every) <= MAX_TRIALS:
        return every
    return sorted(rng.sample(every, MAX_TRIALS))


def blind(group: ClusterGroup, k: int, fitter: Fitter = default_fitter) -> BlindScore:
    """Calibrate on k runs, predict the rest, for every (or MAX_TRIALS) k-subsets."""
    rng = random.Random(f"{SEED}/{group.name}/{k}")
    pts = group.points
    base = [_predict(p, None) for p in pts]
    score = BlindScore(group.name, group.kind, k)
    for subset in _subsets(len(pts), k, rng):
        cal = fitter([pts[i] for i in subset])
        score.trials += 1
        for i, p in enumerate(pts):
            if i not in subset:
                score.before.append(base[i])
                score.after.append(_predict(p, cal))
    return score


@dataclass(frozen=True)
class Transfer:
    """All runs of one model calibrate; the runs of another model of the same group are predicted."""

    group: str
    kind: str
    source_model: str
    target_model: str
    before: tuple[float, ...]
    after: tuple[float, ...]


def cross_model(group: ClusterGroup, fitter: Fitter = default_fitter) -> list[Transfer]:
    """Every ordered pair of models of the group."""
    by_model: dict[str, list[FitPoint]] = {}
    for p in group.points:
        by_model.setdefault(p.model.name, []).append(p)
    out = []
    for src, tgt in itertools.permutations(sorted(by_model), 2):
        cal = fitter(by_model[src])
        out.append(
            Transfer(
                group.name,
                group.kind,
                src,
                tgt,
                tuple(_predict(p, None) for p in by_model[tgt]),
                tuple(_predict(p, cal) for p in by_model[tgt]),
            )
        )
    return out


def log_error(e: float) -> float:
    """log(predicted / measured) of a relative error."""
    return math.log1p(e)
