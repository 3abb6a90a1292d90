"""Watches: what to re-plan every night, checked as a job's request is when they are created."""

from __future__ import annotations

from sqlalchemy.orm import Session

from optimizer.errors import DomainError
from optimizer.spec.objectives import objective_name
from optimizer.spec.workload import InferenceWorkload, TrainingWorkload
from service.job_requests import SearchOptions, check, target
from store.models import Watch
from store.repositories.watches import WatchRepository
from store.repositories.workloads import WorkloadRepository
from store.settings import Settings


def create_watch(
    s: Session,
    name: str,
    cluster_id: int,
    model_id: int,
    workload: TrainingWorkload | InferenceWorkload,
    search: SearchOptions,
    time_limit_s: float | None,
    cfg: Settings,
    switch_threshold_pct: float | None = None,
) -> Watch:
    """A new watch. When the cluster has an inventory and the model a version, the request its re-plans will
    submit is checked now rather than at night (a DomainError naming the field)."""
    if switch_threshold_pct is not None and not 0 <= switch_threshold_pct <= 100:
        raise DomainError("switch_threshold_pct", f"must be between 0 and 100 percent (got {switch_threshold_pct:g})")
    if search.ran is not None:
        raise DomainError("search.ran", "a watch re-plans every night; report a run that ran with a job instead")
    t = target(s, cluster_id, model_id)
    limit = cfg.time_limit(time_limit_s)
    if t.revision is not None and t.version is not None:
        check(t, workload, search, limit, cfg)
    w = Watch(
        name=name,
        cluster_id=t.cluster.id,
        model_id=t.model.id,
        workload_id=WorkloadRepository(s).intern(workload).id,
        search=search.model_dump(mode="json"),
        objective=objective_name(workload),
        time_limit_s=limit,
        switch_threshold_pct=switch_threshold_pct,
    )
    return WatchRepository(s).create(w)
