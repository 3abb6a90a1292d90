"""Reading plans back: their inputs as specs, the inventory change between two plans, which plan to compare with."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session

from optimizer.errors import DomainError
from optimizer.exports.job_scripts import export_job
from optimizer.exports.launch import Export
from optimizer.exports.plan_diff import PlanDiff, diff_fleets, diff_plans
from optimizer.placement.place import place
from optimizer.placement.result import Placement
from optimizer.search.fleet_result import FleetPlan
from optimizer.search.result import PlannedConfig
from optimizer.spec.cluster_spec import ClusterSpec
from optimizer.spec.inventory import InventoryDiff, diff_inventories
from optimizer.spec.model_spec import ModelSpec
from optimizer.spec.workload import InferenceWorkload, TrainingWorkload
from store.errors import NotFoundError
from store.models import Job, Plan
from store.repositories.clusters import ClusterRepository, revision_spec
from store.repositories.models import ModelRepository, version_spec
from store.repositories.plans import PlanRepository
from store.repositories.workloads import WorkloadRepository, workload_spec


@dataclass(frozen=True)
class Specs:
    """The model version, inventory revision and workload a job was (or a plan was) solved for."""

    model: ModelSpec
    cluster: ClusterSpec
    workload: TrainingWorkload | InferenceWorkload


def specs_of(s: Session, row: Job | Plan) -> Specs:
    clusters, models = ClusterRepository(s), ModelRepository(s)
    return Specs(
        model=version_spec(models.get(row.model_id), models.version_by_id(row.model_version_id)),
        cluster=revision_spec(clusters.get(row.cluster_id), clusters.revision_by_id(row.cluster_revision_id)),
        workload=workload_spec(WorkloadRepository(s).get(row.workload_id)),
    )


def planned(plan_row: Plan) -> PlannedConfig | None:
    """The chosen configuration with its estimate, or None for an infeasible result."""
    doc = plan_row.result.get("plan")
    return PlannedConfig.model_validate(doc) if doc else None


def placement_of(plan_row: Plan, specs: Specs) -> Placement | None:
    """A training plan's placement: as stored with it, or (a plan stored before placements were) placed now on the
    inventory revision it was solved for. None for serving and infeasible plans."""
    doc = plan_row.result.get("placement")
    if doc:
        return Placement.model_validate(doc)
    best = planned(plan_row)
    if best is None or not isinstance(specs.workload, TrainingWorkload) or plan_row.result.get("fleet"):
        return None
    return place(specs.cluster, best.config).placement


def job_export(s: Session, plan_row: Plan, scheduler: str) -> Export:
    """A training plan's Slurm script or Kubernetes JobSet on its placement (optimizer/exports/job_scripts.py)."""
    best = planned(plan_row)
    if best is None:
        raise DomainError(
            "plan", f"plan {plan_row.id} is {plan_row.solver_status}: there is no configuration to export"
        )
    specs = specs_of(s, plan_row)
    placement = placement_of(plan_row, specs)
    if placement is None or not isinstance(specs.workload, TrainingWorkload):
        raise DomainError("export", f"{scheduler} runs a training plan on its placement; plan {plan_row.id} is serving")
    return export_job(
        scheduler,
        specs.model,
        specs.workload,
        best.config,
        placement,
        specs.cluster,
        framework=plan_row.result.get("framework"),
        model_ref=specs.model.name,
        estimate=best.estimate,
        job_name=f"meshplan-{plan_row.id}",
    )


def fleet_of(plan_row: Plan) -> FleetPlan | None:
    """An SLA plan's serving fleet, or None for other plans."""
    doc = plan_row.result.get("fleet")
    return FleetPlan.model_validate(doc) if doc else None


def plan_change(before: Plan, after: Plan) -> PlanDiff:
    """What changed between two stored plans: their fleets when both are SLA fleets, else their configurations."""
    fb, fa = fleet_of(before), fleet_of(after)
    if fb is not None and fa is not None:
        return diff_fleets(fb, fa)
    return diff_plans(planned(before), planned(after))


def inventory_between(s: Session, cluster_id: int, before_revision_id: int, after_revision_id: int) -> InventoryDiff:
    clusters = ClusterRepository(s)
    cluster = clusters.get(cluster_id)
    return diff_inventories(
        revision_spec(cluster, clusters.revision_by_id(before_revision_id)),
        revision_spec(cluster, clusters.revision_by_id(after_revision_id)),
    )


def plan_pair(s: Session, plan_id: int, against: int | None) -> tuple[Plan, Plan]:
    """(before, after): plan `plan_id` and the plan to compare it with (`against`, default its previous plan)."""
    repo = PlanRepository(s)
    after = repo.get(plan_id)
    base = against if against is not None else after.previous_plan_id
    if base is None:
        # a 404 (what to compare with does not exist), not a 422: the request is valid [issue 37 item 2, schemathesis]
        raise NotFoundError("against", plan_id, f"plan {plan_id} has no previous plan; name one with ?against=ID")
    return repo.get(base), after


def inventory_change(s: Session, before: Plan, after: Plan) -> InventoryDiff | None:
    """How the inventory changed between two plans of one cluster (None: same revision or other clusters)."""
    if before.cluster_id != after.cluster_id or before.cluster_revision_id == after.cluster_revision_id:
        return None
    return inventory_between(s, after.cluster_id, before.cluster_revision_id, after.cluster_revision_id)
