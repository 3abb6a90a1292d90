"""What a planning job's submission carries (`JobRequest`, its `SearchOptions`) and the checks it passes before
anything is stored: the rows it names exist, and what the specs decide without building a search space
(`check_request`, the checks `plan` runs before it builds a search space; a reported configuration, `search.ran`,
against every rule of the cost model). What only the search space can tell (a
pin that leaves a knob no value on these pools) fails the job when it runs, with the same message."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from sqlalchemy.orm import Session

from optimizer.errors import DomainError
from optimizer.search.planner import check_request
from optimizer.search.reported import reported_plan
from optimizer.search.space import DEFAULT_SCHEDULES, SearchSpace, parse_pins
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.validation_errors import domain_error_from_validation
from optimizer.spec.workload import InferenceWorkload, TrainingWorkload
from optimizer.spec.workload import Workload as WorkloadSpec
from store.models import MAX_ID, Cluster, ClusterRevision, Model, ModelVersion
from store.repositories.clusters import ClusterRepository, cached_revision_spec
from store.repositories.models import ModelRepository, cached_version_spec
from store.repositories.submissions import SubmissionRows
from store.settings import Settings


class SearchOptions(BaseModel):
    """The user's constraints on the search (as `meshplan plan` takes them)."""

    model_config = ConfigDict(extra="forbid")

    pins: list[str] = Field(default_factory=list, max_length=32, description="Knob pins: tp=8, pp<=16, zero=1,3.")
    max_gpus: int | None = Field(default=None, ge=1, le=10_000_000, description="GPU budget.")
    pools: list[str] | None = Field(default=None, max_length=256, description="Pools the plan may use.")
    schedules: list[str] | None = Field(default=None, max_length=8, description="Pipeline schedules searched.")
    ran: ParallelConfig | None = Field(
        default=None,
        description="A training configuration that ran (reported): no search; the plan holds it with its estimate, "
        "any memory overrun the model predicts stated instead of refused (solver_status REPORTED), and its "
        "measurements attach to it as to any plan. Leave pins, max_gpus, pools and schedules out.",
    )

    fallbacks: bool = Field(
        default=True,
        description="Training: with the plan, compute its fallbacks after losing one node, two nodes, an NVLink "
        "domain or a leaf switch (optimizer/search/fallbacks.py; a few seconds beyond the plan); false: none.",
    )

    def check_ran(self) -> None:
        """A reported configuration is planned as given: nothing to search beside it."""
        if self.ran is None:
            return
        given = [k for k in ("pins", "max_gpus", "pools", "schedules") if getattr(self, k)]
        if given:
            raise DomainError(
                f"search.{given[0]}", "a reported configuration (search.ran) is planned as given: leave it out"
            )

    def space(self) -> SearchSpace:
        """The declared search space (pins parsed; a bad pin names itself under `search.`)."""
        try:
            return SearchSpace(
                pins=parse_pins(self.pins),
                max_gpus=self.max_gpus,
                pools=tuple(self.pools) if self.pools else None,
                schedules=tuple(self.schedules) if self.schedules else DEFAULT_SCHEDULES,
            )
        except DomainError as exc:
            raise DomainError(f"search.{exc.field}", exc.rule) from None
        except ValidationError as exc:  # an unknown schedule
            raise domain_error_from_validation(exc, "search") from None


class JobRequest(BaseModel):
    """What a planning job solves: a cluster revision, a model version, a workload and the search options."""

    model_config = ConfigDict(extra="forbid")

    cluster_id: int = Field(ge=1, le=MAX_ID, description="Cluster to plan on.")
    cluster_revision: int | None = Field(
        default=None, ge=1, le=MAX_ID, description="Inventory revision; default the current."
    )
    model_id: int = Field(ge=1, le=MAX_ID, description="Model to place.")
    model_version: int | None = Field(default=None, ge=1, le=MAX_ID, description="Model version; default the current.")
    workload: WorkloadSpec
    search: SearchOptions = Field(default_factory=SearchOptions)
    time_limit_s: float | None = Field(default=None, description="Solver time limit, seconds (capped by a setting).")
    top_k: int = Field(default=3, ge=1, le=20, description="Plan plus runners-up.")
    calibration: Literal["cluster", "none"] = Field(
        default="cluster",
        description="cluster: price with the cluster's newest calibration (fitted to its measurements); none: the "
        "sourced constants only.",
    )


@dataclass(frozen=True)
class Target:
    """The rows a request names: a cluster with an inventory revision and a model with a version (None: the
    cluster or the model has none yet)."""

    cluster: Cluster
    revision: ClusterRevision | None
    model: Model
    version: ModelVersion | None


def target(
    s: Session, cluster_id: int, model_id: int, cluster_revision: int | None = None, model_version: int | None = None
) -> Target:
    """The cluster and the model (404 when unknown) at the revision and version named, default the current ones."""
    clusters, models = ClusterRepository(s), ModelRepository(s)
    cluster, model = clusters.get(cluster_id), models.get(model_id)
    rev = clusters.revision(cluster, cluster_revision) if cluster_revision else clusters.head(cluster)
    version = models.version(model, model_version) if model_version else models.head(model)
    return Target(cluster, rev, model, version)


def target_of(rows: SubmissionRows) -> Target:
    """The target of a submission read in one query (store/repositories/submissions.py)."""
    return Target(rows.cluster, rows.revision, rows.model, rows.version)


def check(
    t: Target,
    workload: TrainingWorkload | InferenceWorkload,
    search: SearchOptions,
    time_limit_s: float,
    cfg: Settings,
) -> tuple[ClusterRevision, ModelVersion]:
    """Check a request against its target without building the search space: a DomainError naming the field.
    Returns the inventory revision and the model version the job will solve for."""
    if t.revision is None:
        raise DomainError("cluster_id", f"cluster {t.cluster.id} has no inventory yet")
    if t.version is None:
        raise DomainError("model_id", f"model {t.model.id} has no version yet")
    # parsed once per process (immutable rows): re-parsing an inventory on every submission cost up to seconds
    model, cluster = cached_version_spec(t.model, t.version), cached_revision_spec(t.cluster, t.revision)
    search.check_ran()
    space = search.space()
    check_request(model, cluster, workload, space, time_limit_s=time_limit_s, max_time_limit_s=cfg.max_time_limit_s)
    if search.ran is not None:  # its rules now, so that a bad configuration stores nothing (one estimate)
        reported_plan(model, cluster, workload, search.ran)
    return t.revision, t.version
