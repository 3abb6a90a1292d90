"""A training configuration priced on its placement: the estimate of what the chosen hosts give (the cost model's
own where the placement gives what its tiers assume), with the placement's shortfalls in its notes."""

from __future__ import annotations

from dataclasses import dataclass

from optimizer.costmodel.estimate import estimate
from optimizer.costmodel.result import Estimate
from optimizer.frameworks.validation import validate
from optimizer.placement.place import place
from optimizer.placement.result import Placement
from optimizer.spec.cluster_spec import ClusterSpec
from optimizer.spec.model_spec import ModelSpec
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import TrainingWorkload


@dataclass(frozen=True, slots=True)
class PlacedEstimate:
    """An estimate of the placement it comes with."""

    estimate: Estimate
    placement: Placement
    repriced: bool
    """The estimate prices a fabric worse than the cost model's tiers assume (the placement is degraded there)."""


def placed_estimate(
    model: ModelSpec, cluster: ClusterSpec, workload: TrainingWorkload, config: ParallelConfig
) -> PlacedEstimate:
    """Place `config` on `cluster` (optimizer/placement/place.py) and estimate what that placement gives. Where it
    gives what the tiers assume, the estimate is the cost model's own, to the bit."""
    layout = validate(model, cluster, workload, config)
    outcome = place(cluster, config, layout.stage_pools)
    est = estimate(model, cluster, workload, config, outcome.fabric)
    degraded = outcome.placement.degraded
    if degraded:
        est = est.model_copy(update={"notes": [*est.notes, *(f"Placement: {d}." for d in degraded)]})
    return PlacedEstimate(est, outcome.placement, outcome.fabric is not None)
