"""Published goodput figures of named runs (accuracy/data/goodput_runs.json) against the goodput model (issue 46 §3).

Each run is priced as published: its GPUs, nodes, layout and model, the failure rate, recovery mode, planned
restarts and failure shares its source gives, the model's defaults for the rest (each record's `assumptions`).
The prediction is the effective training time ratio (costmodel/goodput.py FailureModel.ettr: slow periods count as
training, as fleets publish it); its 80% band is the fraction's band shifted by the slowdown share. Scores: error in
points, lost-time ratio (predicted lost / published lost), whether a published lower bound is met, whether the
published figure lies in the band.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass
from importlib import resources
from typing import Any

from optimizer.costmodel.estimate import estimate
from optimizer.spec.cluster_loading import resolve_cluster
from optimizer.spec.cluster_spec import ClusterSpec
from optimizer.spec.model_loading import load_model_preset
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.reliability import PoolReliability
from optimizer.spec.workload import TrainingWorkload

GROUPS = ("built_on", "scored", "quarantine")


@dataclass(frozen=True)
class GoodputCase:
    """One published run, priced."""

    id: str
    run: str
    group: str
    published: float
    bound: str
    metric: str
    predicted: float
    band: tuple[float, float]
    citation: str

    @property
    def error_points(self) -> float:
        return 100 * (self.predicted - self.published)

    @property
    def lost_ratio(self) -> float:
        """Predicted lost time over published lost time."""
        return (1 - self.predicted) / (1 - self.published)

    @property
    def bound_met(self) -> bool | None:
        """A lower bound: the prediction reaches it; an upper bound: stays under it; a point: None."""
        if self.bound == "lower":
            return self.predicted >= self.published
        if self.bound == "upper":
            return self.predicted <= self.published
        return None

    @property
    def in_band(self) -> bool:
        return self.band[0] <= self.published <= self.band[1]


def load_runs() -> list[dict[str, Any]]:
    """The records, as stored."""
    text = resources.files("accuracy").joinpath("data/goodput_runs.json").read_text()
    runs: list[dict[str, Any]] = json.loads(text)["runs"]
    return runs


def _cluster(r: dict[str, Any]) -> ClusterSpec:
    c = resolve_cluster(r["cluster"])
    rel = PoolReliability.model_validate(r.get("reliability", {}))
    if "failures_per_1000_node_days" in r:
        rel = rel.with_total_rate(float(r["failures_per_1000_node_days"]))
    if "planned_restarts_per_day" in r:
        rel = rel.model_copy(update={"planned_restarts_per_day": float(r["planned_restarts_per_day"])})
    update: dict[str, Any] = {"nodes": int(r["nodes"]) + int(r.get("spare_nodes", 0)), "reliability": rel}
    if "gpus_per_node" in r:
        gpn = int(r["gpus_per_node"])
        pool = c.pools[0]
        update["gpus_per_node"] = gpn
        if pool.intra_node is not None:
            update["intra_node"] = pool.intra_node.model_copy(update={"domain_size": gpn})
    return c.model_copy(update={"pools": [c.pools[0].model_copy(update=update)]})


def price(r: dict[str, Any]) -> GoodputCase:
    """One record priced by the goodput model."""
    model = load_model_preset(r["model"])
    w = TrainingWorkload(global_batch_size=int(r["global_batch_size"]), seq_len=int(r["seq_len"]))
    cfg = ParallelConfig.model_validate(r["config"])
    g = estimate(model, _cluster(r), w, cfg).goodput
    if g is None:
        raise ValueError(f"{r['id']}: no goodput (the estimate has no finite step time)")
    shift = g.ettr - g.fraction
    lo, hi = g.fraction_interval or (g.fraction, g.fraction)
    return GoodputCase(
        id=r["id"],
        run=r["run"],
        group=r["group"],
        published=float(r["published"]),
        bound=r["bound"],
        metric=r["metric"],
        predicted=g.ettr,
        band=(lo + shift, min(1.0, hi + shift)),
        citation=r["citation"],
    )


def cases() -> list[GoodputCase]:
    return [price(r) for r in load_runs()]


@dataclass(frozen=True)
class GroupScore:
    group: str
    n: int
    lost_ratio_geomean: float
    median_abs_error_points: float
    bounds_met: str
    in_band: str


def score(group: str, cs: list[GoodputCase]) -> GroupScore | None:
    """Targets of issue 46 §3 on a group: geometric mean lost-time ratio, median |error|, bounds met, coverage."""
    mine = [c for c in cs if c.group == group]
    if not mine:
        return None
    ratios = [c.lost_ratio for c in mine if c.bound == "point" and c.lost_ratio > 0]
    gm = math.exp(statistics.fmean(math.log(x) for x in ratios)) if ratios else math.nan
    errs = [abs(c.error_points) for c in mine if c.bound == "point"]
    bounds = [c.bound_met for c in mine if c.bound_met is not None]
    return GroupScore(
        group=group,
        n=len(mine),
        lost_ratio_geomean=gm,
        median_abs_error_points=statistics.median(errs) if errs else math.nan,
        bounds_met=f"{sum(bounds)}/{len(bounds)}",
        in_band=f"{sum(c.in_band for c in mine)}/{len(mine)}",
    )
