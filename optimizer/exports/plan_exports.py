"""One plan's exports for one tool, the same on every path (the CLI's `plan --export` and `export`, the API's
/export and /fleet-export, the plan page's Copy buttons) [issue 53 §2]: a scheduler's job on the plan's placement,
an SLA fleet's launch per replica group (and a disaggregated fleet's front end), or the plan's own launch."""

from __future__ import annotations

from optimizer.errors import DomainError
from optimizer.exports.export_record import Export
from optimizer.exports.job_scripts import export_job
from optimizer.exports.launch import export, export_fleet
from optimizer.placement.place import place
from optimizer.search.result import PlanResult
from optimizer.spec.cluster_spec import ClusterSpec
from optimizer.spec.model_ids import with_note
from optimizer.spec.model_spec import ModelSpec
from optimizer.spec.names import SCHEDULERS
from optimizer.spec.workload import InferenceWorkload, TrainingWorkload

# The job name a scheduler export takes when the plan has no stored id (the CLI's `plan --export`): export_job's
# own default (optimizer/exports/job_scripts.py).
UNSTORED_JOB_NAME = "meshplan"


def plan_exports(
    tool: str,
    result: PlanResult,
    model: ModelSpec,
    cluster: ClusterSpec,
    workload: TrainingWorkload | InferenceWorkload,
    model_ref: str = "MODEL",
    model_note: str | None = None,
    job_name: str = UNSTORED_JOB_NAME,
) -> list[Export]:
    """What `tool` launches for `result`: one Export, or one per replica group of an SLA fleet (the front end of a
    disaggregated fleet last). `model_ref` is what a serving engine loads and `model_note` says why it is a
    placeholder (optimizer/spec/model_ids.py); `job_name` names a scheduler's job."""
    best = result.plan
    if best is None:
        raise DomainError("plan", f"the plan is {result.status}: there is no configuration to export")
    if tool in SCHEDULERS:
        return [_job(tool, result, model, cluster, workload, job_name)]
    if result.fleet is not None and isinstance(workload, InferenceWorkload):
        exports = export_fleet(tool, model, workload, result.fleet, model_ref)
    else:
        exports = [
            export(tool, model, workload, best.config, model_ref, framework=result.framework, estimate=best.estimate)
        ]
    return with_note(model_note, exports) if isinstance(workload, InferenceWorkload) else exports


def _job(
    scheduler: str,
    result: PlanResult,
    model: ModelSpec,
    cluster: ClusterSpec,
    workload: TrainingWorkload | InferenceWorkload,
    job_name: str,
) -> Export:
    """A training plan's Slurm script or Kubernetes JobSet on its placement (as stored, or placed now on `cluster`
    for a plan stored before placements were)."""
    best = result.plan
    if best is None or not isinstance(workload, TrainingWorkload) or result.fleet is not None:
        raise DomainError("export", f"{scheduler} runs a training plan on its placement; a serving plan has none")
    placement = result.placement or place(cluster, best.config).placement
    return export_job(
        scheduler,
        model,
        workload,
        best.config,
        placement,
        cluster,
        framework=result.framework,
        model_ref=model.name,
        estimate=best.estimate,
        job_name=job_name,
    )
