"""What one search is asked: the specs, the search space, its time limit and how it reports (explicit state that
the training, serving and SLA planners take whole, instead of each repeating the same nine arguments)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from optimizer.search.result import ProgressFn
from optimizer.search.space import SearchSpace
from optimizer.spec.cluster_spec import ClusterSpec
from optimizer.spec.model_spec import ModelSpec
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import InferenceWorkload, TrainingWorkload

W = TypeVar("W", TrainingWorkload, InferenceWorkload)


@dataclass(frozen=True, slots=True)
class SearchRequest(Generic[W]):
    """One search: what to plan for, where, and within which limits."""

    model: ModelSpec
    cluster: ClusterSpec
    workload: W
    space: SearchSpace
    time_limit_s: float
    """Wall-clock seconds the search may take (it answers FEASIBLE or UNKNOWN at the limit, never INFEASIBLE)."""
    top_k: int = 3
    """Plans to return: the best and its runners-up."""
    warm_start: ParallelConfig | None = None
    """A configuration to try first (training: the previous plan of a watch)."""
    progress: ProgressFn | None = None
    """Called with the search's progress (live job status)."""
    cancelled: Callable[[], bool] | None = None
    """Polled; True stops the search (UNKNOWN, or FEASIBLE with the best plan so far)."""
    measured: tuple[ParallelConfig, ...] = ()
    interval_rule: bool = True
    """Training: pick by the interval rule (optimizer/search/decision.py); False: by the point estimate alone (the
    search's optimality checks against the exhaustive oracle)."""
    """Training: configurations measured on this cluster; among plans the intervals cannot order, the planner
    prefers the one nearest them (optimizer/search/decision.py)."""

    def with_changes(self, **changes: object) -> SearchRequest[W]:
        """A copy with some fields replaced (a framework's share of the time, a quiet progress)."""
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]
