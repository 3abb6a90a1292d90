"""Request and response bodies of the HTTP API. Spec documents are the optimizer's own pydantic models."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from optimizer.calibration.acceptance import AcceptanceFigure
from optimizer.calibration.measurements import Measurement
from optimizer.errors import DomainError
from optimizer.exports.plan_diff import PlanDiff
from optimizer.search.replan_decision import ReplanDecision
from optimizer.search.result import PlanResult
from optimizer.spec.calibration import ClusterCalibration
from optimizer.spec.gpu_catalog import GPUSpec
from optimizer.spec.inventory import InventoryDiff
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.reliability import PoolReliability
from optimizer.spec.scheduler_inventory.inventory_document import ImportDefaults
from optimizer.spec.scheduler_inventory.kubernetes import KubernetesLabels
from optimizer.spec.scheduler_inventory.sources import SyncSource
from optimizer.spec.workload import Workload
from service.job_requests import JobRequest, SearchOptions

T = TypeVar("T")
NAME = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9._-]+$", description="Unique name.")


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PageOut(BaseModel, Generic[T]):
    items: list[T]
    total: int = Field(description="Rows matching the filters.")
    offset: int
    limit: int


class ErrorItem(BaseModel):
    loc: list[str | int] = Field(description="Path of the offending field.")
    msg: str = Field(description="The rule it breaks.")
    type: str


class ValidationErrorOut(BaseModel):
    detail: list[ErrorItem]


class ErrorOut(BaseModel):
    detail: str


# ---- GPU types
class GpuTypeOut(BaseModel):
    name: str
    builtin: bool
    spec: GPUSpec


# ---- clusters
# What the schema can say of an inventory without holding the whole cluster spec: an object with at least one pool
# (ClusterSpec.pools: min_length 1, max_length 256) [issue 47 item 3]. The rest (GPU names, node names, fabric) is
# checked on arrival and refused with a 422 naming the field.
INVENTORY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["pools"],
    "properties": {"pools": {"type": "array", "minItems": 1, "maxItems": 256, "items": {"type": "object"}}},
}


class ClusterCreate(Strict):
    name: str = NAME
    inventory: dict[str, Any] = Field(
        description="Pools, nodes, node states, fabric (the cluster YAML as JSON).", json_schema_extra=INVENTORY_SCHEMA
    )


class InventoryPut(Strict):
    inventory: dict[str, Any] = Field(
        description="Pools, nodes, node states, fabric (the cluster YAML as JSON).", json_schema_extra=INVENTORY_SCHEMA
    )
    cause: str = Field(
        default="inventory update", max_length=200, pattern=r"^[^\x00-\x1f]*$", description="Why it changed."
    )


class NodePatch(Strict):
    state: Literal["healthy", "drained", "failed"] = Field(description="healthy restores a drained or failed node.")


class PoolSummary(BaseModel):
    name: str
    gpu: str
    nodes: int
    gpus_per_node: int
    healthy_gpus: int
    nodes_by_state: dict[str, int]
    reliability: PoolReliability = Field(
        description="Failure rates, checkpoint bandwidth, restart cost and spare nodes the goodput model uses "
        "(the sourced defaults where the inventory sets none)."
    )
    reliability_sourced: bool = Field(description="The inventory sets no reliability: the sourced defaults apply.")


class RevisionOut(BaseModel):
    number: int
    content_hash: str
    recorded_at: datetime
    cause: str
    healthy_gpus: int
    total_gpus: int
    diff: InventoryDiff | None = Field(description="Against the previous revision.")
    inventory: dict[str, Any]


class ClusterOut(BaseModel):
    id: int
    name: str
    created_at: datetime
    revision: int = Field(description="Current inventory revision.")
    healthy_gpus: int
    total_gpus: int
    pools: list[PoolSummary]
    inventory: dict[str, Any]
    sync_source: SyncSource | None = Field(default=None, description="The scheduler its inventory is synced from.")
    last_sync: str = Field(default="", description="What the last sync found.")
    last_synced_at: datetime | None = Field(default=None, description="When the last sync ran.")


class SyncRequest(Strict):
    source: SyncSource | None = Field(
        default=None, description="The scheduler to read (stored on the cluster); default the stored one."
    )
    replan: bool | None = Field(
        default=None,
        strict=True,
        description="Check the cluster's watches when a new revision is stored (default: the service's "
        "replan_on_inventory_change setting).",
    )


class SyncSourcePut(Strict):
    source: SyncSource | None = Field(description="The scheduler to sync from; null: no sync.")


class SlurmImport(Strict):
    nodes: dict[str, Any] = Field(description="The output of `sinfo --json` (or `scontrol show nodes --json`).")
    topology: str | None = Field(
        default=None, max_length=500_000, description="topology.conf, or what `scontrol show topology` prints."
    )
    defaults: ImportDefaults = Field(default_factory=ImportDefaults, description="NICs of the new pools.")


class KubernetesImport(Strict):
    nodes: dict[str, Any] = Field(description="The output of `kubectl get nodes -o json`.")
    labels: KubernetesLabels = Field(default_factory=KubernetesLabels, description="Topology label keys.")
    defaults: ImportDefaults = Field(default_factory=ImportDefaults, description="NICs of the new pools.")


class InventoryResult(BaseModel):
    created: bool = Field(description="False when the inventory equals the current one (no new revision).")
    revision: RevisionOut
    replan_jobs: list[int] = Field(default_factory=list, description="Jobs submitted for the cluster's watches.")


class RevisionDiffOut(BaseModel):
    before: int
    after: int
    diff: InventoryDiff
    summary: str


# ---- models
class ModelVersionCreate(Strict):
    spec: dict[str, Any] | None = Field(default=None, description="meshplan model fields (as in model.yaml).")
    hf_config: dict[str, Any] | None = Field(default=None, description="A HuggingFace config.json body.")
    preset: str | None = Field(
        default=None,
        min_length=1,
        max_length=64,
        description="A shipped model preset by name, as `--model` takes it (`meshplan models` lists them).",
    )

    @model_validator(mode="after")
    def _one(self) -> ModelVersionCreate:
        if sum(v is not None for v in (self.spec, self.hf_config, self.preset)) != 1:
            raise DomainError("spec", "give exactly one of spec, hf_config or preset")
        return self


class ModelCreate(ModelVersionCreate):
    name: str = NAME


class VersionOut(BaseModel):
    number: int
    created_at: datetime
    parameters: int
    num_layers: int
    is_moe: bool
    spec: dict[str, Any]


class ModelOut(BaseModel):
    id: int
    name: str
    created_at: datetime
    version: int
    parameters: int
    num_layers: int
    is_moe: bool
    spec: dict[str, Any]


class VersionResult(BaseModel):
    created: bool
    version: VersionOut


# ---- jobs
class JobProgress(BaseModel):
    best_objective: float | None
    bound: float | None
    elapsed_s: float | None
    candidates_solved: int | None
    updated_at: datetime | None


class JobOut(BaseModel):
    id: int
    status: Literal["queued", "running", "succeeded", "failed", "cancelled"]
    cluster_id: int
    cluster_revision: int
    model_id: int
    model_version: int
    workload: Workload
    search: SearchOptions
    objective: str
    time_limit_s: float
    top_k: int
    progress: JobProgress
    error: str | None
    trigger: str
    watch_id: int | None
    attempts: int
    cancel_requested: bool
    plan_id: int | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


JobCreate = JobRequest


# ---- plans
class PlanSummaryOut(BaseModel):
    id: int
    job_id: int
    created_at: datetime
    trigger: str
    cluster_id: int
    cluster_revision: int
    model_id: int
    model_version: int
    watch_id: int | None
    previous_plan_id: int | None
    solver_status: str
    objective: str
    objective_value: float | None
    step_time_s: float | None
    gap: float | None
    gpus: int | None
    mfu: float | None
    peak_memory_gb: float | None
    summary: str
    change: str | None = Field(description="Against the previous plan, in words.")
    calibration_id: int | None = Field(default=None, description="The cluster calibration it was planned with.")


class PlanOut(PlanSummaryOut):
    workload: Workload
    result: PlanResult
    diff: dict[str, Any] | None = Field(description="Inputs and plan changes against the previous plan.")
    decision: ReplanDecision | None = Field(
        default=None, description="A watch's re-plan: the running layout kept, switched or shrunk, and why."
    )


class PlanDiffOut(BaseModel):
    plan_id: int
    against: int
    diff: PlanDiff
    summary: str
    inventory: InventoryDiff | None = Field(description="When the two plans ran on different revisions.")


# ---- watches
class WatchCreate(Strict):
    name: str = NAME
    cluster_id: int = Field(ge=1, le=2_147_483_647)
    model_id: int = Field(ge=1, le=2_147_483_647)
    workload: Workload
    search: SearchOptions = Field(default_factory=SearchOptions)
    time_limit_s: float | None = Field(default=None, description="Solver time limit per re-plan, seconds.")
    switch_threshold_pct: float | None = Field(
        default=None,
        ge=0,
        le=100,
        description="Percent a re-plan's new layout must be predicted faster (besides its 80% interval lying above "
        "no gain) before it replaces the running one; default 5.",
    )


class WatchOut(BaseModel):
    id: int
    name: str
    cluster_id: int
    model_id: int
    workload: Workload
    search: SearchOptions
    time_limit_s: float
    last_plan_id: int | None
    last_checked_at: datetime | None
    last_check: str
    created_at: datetime
    switch_threshold_pct: float | None = Field(default=None, description="None: the default (5%).")


class ReplanOut(BaseModel):
    watch_id: int
    changed: list[str]
    job: JobOut | None


class Health(BaseModel):
    status: str
    database: str | None = None
    broker: str | None = None
    mode: str | None = None


# ---- measurements and calibrations [issue 14]
class MeasurementOut(BaseModel):
    id: int
    plan_id: int
    created_at: datetime
    source: str
    measurement: Measurement
    measured_step_s: float | None = Field(description="Seconds per step (from step_time_s or tokens_per_s).")
    planned_step_s: float | None = Field(description="What the plan predicted (with the calibration it used).")
    uncalibrated_step_s: float | None = Field(description="The sourced constants' prediction.")
    calibrated_step_s: float | None = Field(description="With the cluster's current calibration.")
    error: float | None = Field(description="Planned / measured - 1.")
    flagged: bool = Field(description="More than 20% from the plan's prediction.")
    predicted_memory_gb: float | None = Field(description="Predicted peak allocated per GPU (no reserve).")


class TraceMeasurementOut(MeasurementOut):
    breakdown: dict[str, Any] = Field(
        description="The trace per rank and step: GEMM / attention / other compute, each collective by kind and "
        "group, exposed and overlapped communication, idle and wall time, us (optimizer/calibration/"
        "trace_breakdown.py); stored with the measurement."
    )
    priced_phases_s: dict[str, float] = Field(
        description="The plan's estimate (sourced constants) of the traced phases compute, exposed_comm and idle, "
        "seconds per step (optimizer/calibration/trace_priced.py), beside measurement.phases_s."
    )


class CalibrationOut(BaseModel):
    id: int
    cluster_id: int
    number: int
    created_at: datetime
    measurements: int
    change: float = Field(description="Largest relative change of a constant against the previous version.")
    constants: ClusterCalibration
    report: dict[str, Any] = Field(description="The fit's evidence: each constant with its spread and support.")


class CalibrateOut(BaseModel):
    created: bool = Field(description="False when the refit moved no constant (the current version stands).")
    calibration: CalibrationOut
    fit: dict[str, Any] = Field(
        description="This refit's evidence: the measurements it used and each constant, whether or not it created "
        "a version (with created false, `calibration.report` is the standing version's)."
    )


# ---- acceptance tests [issue 33]
class AcceptanceTestOut(BaseModel):
    id: int | None = Field(description="The stored test (None: a dry run, checked and not stored).")
    cluster_id: int
    pool: str = Field(description="The pool it ran on.")
    kind: str = Field(description="nccl-tests or gemm.")
    subject: str = Field(description="The collective (nccl-tests) or the input dtype (gemm).")
    note: str = Field(description="File name or free text.")
    created_at: datetime | None = Field(description="When it was recorded (None: a dry run).")
    figures: dict[str, Any] = Field(
        description="The parsed run: ranks, hosts, GPU and the size / time / algbw / busbw table (nccl-tests); "
        "dtype, device and the best mean / median / max TFLOP/s with their shapes (gemm)."
    )
    comparison: list[AcceptanceFigure] = Field(
        description="Measured vs the cost model's sourced figures (GB/s, us, TFLOP/s), each with the calibration "
        "constant it pins and that constant's value."
    )
    sets_priors: bool = Field(
        description="The newest test of its pool, kind, subject and scope (one node or several): its figures are "
        "the calibration's priors."
    )
    error: str = Field(description="Why it cannot be read against the cluster's current inventory ('' when it can).")


# ---- estimates
class EstimateRequest(Strict):
    cluster_id: int = Field(ge=1, le=2_147_483_647, description="The cluster, at its current inventory revision.")
    model_id: int = Field(ge=1, le=2_147_483_647, description="The model, at its current version.")
    workload: Workload
    config: ParallelConfig = Field(description="The one parallel configuration to price.")
