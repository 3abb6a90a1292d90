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

import contextlib
import dataclasses
import itertools
import math
import random
import statistics
from collections.abc import Callable, Iterator, Sequence
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
    kind: str  # "published" (in-sample), "bridge" (out of sample) or "stack" (a stack priced as left out)
    points: tuple[FitPoint, ...]
    left_out: str | None = None
    """kind "stack": the published group whose own fitted terms are set to their priors and whose release leaves the
    fitted stacks while it is priced (accuracy/leave_out.py REFITS), as the model stood before that source."""

    def priced(self) -> contextlib.AbstractContextManager[None]:
        """The model this group is priced with: as shipped, or as it stood before its own source (kind stack)."""
        return _as_left_out(self.left_out) if self.left_out else contextlib.nullcontext()


# A published source whose runs fitted terms of their own stack (a release's compute factor, its float8 recipe) is
# also a blind group of a stack the model had not seen: priced with those terms at their priors, from MIN_STACK_RUNS.
MIN_STACK_RUNS = 3


@contextlib.contextmanager
def _as_left_out(group: str) -> Iterator[None]:
    from accuracy.leave_out import REFITS
    from accuracy.published_runs import load_records
    from optimizer.frameworks import releases

    own = [r for r in REFITS if r.fit_groups == frozenset({group})]
    stated: dict[str, set[str]] = {}  # group -> the releases its records state
    for rec in load_records():
        if rec.get("framework_version"):
            stated.setdefault(rec["group"], set()).add(rec["framework_version"])
    fitted = releases.FITTED
    kept = []
    for f in fitted:
        if group in f.groups:
            others = tuple(g for g in f.groups if g != group)
            still = set().union(*(stated.get(g, set()) for g in others)) if others else set()
            f = dataclasses.replace(f, groups=others, releases=tuple(v for v in f.releases if v in still))
        kept.append(f)
    releases.FITTED = tuple(kept)
    try:
        with contextlib.ExitStack() as stack:
            for r in own:
                stack.enter_context(r.patch(r.prior))
            yield
    finally:
        releases.FITTED = fitted


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
    groups = [g for g in groups if len(g.points) >= min_runs]
    from accuracy.leave_out import REFITS

    own = {g for r in REFITS if len(r.fit_groups) == 1 for g in r.fit_groups}
    stacks = [
        ClusterGroup(f"{k} (stack left out)", "stack", tuple(v), left_out=k)
        for k, v in sorted(published.items())
        if k in own and len(v) >= min(min_runs, MIN_STACK_RUNS) and {p.workload.framework for p in v} != {"megatron"}
    ]
    return groups + stacks


def _predict(p: FitPoint, cal: ClusterCalibration | None) -> float:
    t = estimate(p.model, p.cluster.with_calibration(cal), p.workload, p.config, goodput_band=False).step_time_s
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
    score = BlindScore(group.name, group.kind, k)
    with group.priced():
        base = [_predict(p, None) for p in pts]
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
        with group.priced():
            cal = fitter(by_model[src])
            before = tuple(_predict(p, None) for p in by_model[tgt])
            after = tuple(_predict(p, cal) for p in by_model[tgt])
        out.append(Transfer(group.name, group.kind, src, tgt, before, after))
    return out


def log_error(e: float) -> float:
    """log(predicted / measured) of a relative error."""
    return math.log1p(e)
