"""Reading plans back: their inputs as specs, the inventory change between two plans, which plan to compare with."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session

from optimizer.errors import DomainError
from optimizer.exports.launch import Export
from optimizer.exports.plan_diff import PlanDiff, diff_fleets, diff_plans
from optimizer.exports.plan_exports import plan_exports
from optimizer.placement.place import place
from optimizer.placement.result import Placement
from optimizer.search.fleet_result import FleetPlan
from optimizer.search.result import PlannedConfig, PlanResult
from optimizer.spec.cluster_spec import ClusterSpec
from optimizer.spec.inventory import InventoryDiff, diff_inventories
from optimizer.spec.model_ids import stored_model
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


@dataclass(frozen=True)
class StoredPlan:
    """A stored plan as its exports read it: the planner's result (its placement filled for a training plan stored
    before placements were), the specs it was solved for, and what a serving engine loads."""

    plan_id: int
    result: PlanResult
    specs: Specs
    model_ref: str
    model_note: str | None

    def exports(self, tool: str) -> list[Export]:
        """The plan's exports for `tool` (optimizer/exports/plan_exports.py): a scheduler's job on the placement, an
        SLA fleet's launch per replica group (and front end), or the plan's launch."""
        return plan_exports(
            tool,
            self.result,
            self.specs.model,
            self.specs.cluster,
            self.specs.workload,
            model_ref=self.model_ref,
            model_note=self.model_note,
            job_name=f"meshplan-{self.plan_id}",
        )


def stored_plan(s: Session, plan_row: Plan, model_id: str | None = None) -> StoredPlan:
    """`plan_row` ready to export; `model_id`: what a serving engine loads (default the preset's Hugging Face id,
    else MODEL and a note). An infeasible plan has nothing to export (an error naming `plan`)."""
    if planned(plan_row) is None:
        raise DomainError(
            "plan", f"plan {plan_row.id} is {plan_row.solver_status}: there is no configuration to export"
        )
    specs = specs_of(s, plan_row)
    result = PlanResult.model_validate(plan_row.result)
    if result.placement is None and result.fleet is None and isinstance(specs.workload, TrainingWorkload):
        result = result.model_copy(update={"placement": placement_of(plan_row, specs)})
    ref, note = stored_model(specs.model.name, model_id)
    return StoredPlan(plan_row.id, result, specs, ref, note)


def stored_exports(s: Session, plan_row: Plan, tool: str, model_id: str | None = None) -> list[Export]:
    """A stored plan's exports for `tool`: the one function behind the API's /export and /fleet-export, the plan
    page's Copy buttons and the CLI's `export` [issue 53 §2]."""
    return stored_plan(s, plan_row, model_id).exports(tool)


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
