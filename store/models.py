"""The schema: SQLAlchemy 2 typed mappings. Spec documents are JSON; what is filtered or sorted on is a column."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, declared_attr, mapped_column, relationship
from sqlalchemy.types import TypeDecorator

# One naming convention for every constraint, so that migrations name them the same on SQLite and PostgreSQL.
NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

MAX_ID = 2_147_483_647  # ids are 32-bit integer columns
JOB_STATES = ("queued", "running", "succeeded", "failed", "cancelled")
TRIGGERS = ("user", "nightly", "inventory_change")


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC timestamps on every backend (SQLite stores them naive)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is not None and value.tzinfo is None:
            raise ValueError("naive datetime")
        return value.astimezone(UTC) if value is not None else None

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is not None and value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value


Document = JSON().with_variant(JSONB(), "postgresql")
# A document column whose None is SQL NULL (JSON stores Python None as the JSON value null unless told), so that
# `IS NULL` finds the rows without one.
NullableDocument = JSON(none_as_null=True).with_variant(JSONB(none_as_null=True), "postgresql")


def now() -> datetime:
    return datetime.now(UTC)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)
    type_annotation_map: ClassVar[dict[Any, Any]] = {
        datetime: UTCDateTime(),
        dict[str, Any]: Document,
        list[Any]: Document,
    }


# Column order in CREATE TABLE: SQLAlchemy puts a class's own columns before those it inherits unless their
# sort_order is lower; these keep the id first, then a row's parent key, then the shared columns (LAST: after the
# class's own).
ID_FIRST, PARENT_KEY, SHARED, LAST = -3, -2, -1, 1


# SQLite hands out max(id)+1, so the newest row's id comes back once that row is deleted (a deleted job's id would
# name the next job); AUTOINCREMENT never gives an id twice (https://sqlite.org/autoinc.html). PostgreSQL's
# sequences never reuse one; the option is SQLite's only.
NEVER_REUSE_IDS: dict[str, Any] = {"sqlite_autoincrement": True}


class Row(Base):
    """A table whose primary key is an integer `id`, never reused (NEVER_REUSE_IDS: a subclass declaring its own
    __table_args__ ends them with it)."""

    __abstract__ = True
    __table_args__: Any = NEVER_REUSE_IDS
    id: Mapped[int] = mapped_column(primary_key=True, sort_order=ID_FIRST)


class Named(Row):
    """A cluster or a model: a unique name; its documents live in numbered snapshots."""

    __abstract__ = True
    name: Mapped[str] = mapped_column(String(128), unique=True, sort_order=SHARED)
    created_at: Mapped[datetime] = mapped_column(default=now, index=True, sort_order=LAST)


def parent_key(table: str) -> Mapped[int]:
    """A snapshot's `parent` column: the key of its parent row, deleted with it."""
    return mapped_column(ForeignKey(f"{table}.id", ondelete="CASCADE"), index=True, sort_order=PARENT_KEY)


class Snapshot(Row):
    """An immutable numbered snapshot of a parent row's document (a cluster revision, a model version): its
    `parent` column (`cluster_id`...) keys the parent row, one snapshot a number."""

    __abstract__ = True
    parent: ClassVar[str]

    @declared_attr.directive
    def __table_args__(cls) -> tuple[UniqueConstraint, dict[str, Any]]:
        return (UniqueConstraint(cls.parent, "number"), NEVER_REUSE_IDS)

    number: Mapped[int] = mapped_column(sort_order=SHARED)
    spec: Mapped[dict[str, Any]] = mapped_column(sort_order=SHARED)
    content_hash: Mapped[str] = mapped_column(String(64), index=True, sort_order=SHARED)


class JobInputs(Row):
    """The input rows of a job, which its plan copies (the same columns on both tables)."""

    __abstract__ = True
    cluster_id: Mapped[int] = mapped_column(
        ForeignKey("clusters.id", ondelete="CASCADE"), index=True, sort_order=SHARED
    )
    cluster_revision_id: Mapped[int] = mapped_column(
        ForeignKey("cluster_revisions.id", ondelete="CASCADE"), sort_order=SHARED
    )
    model_id: Mapped[int] = mapped_column(ForeignKey("models.id", ondelete="CASCADE"), index=True, sort_order=SHARED)
    model_version_id: Mapped[int] = mapped_column(
        ForeignKey("model_versions.id", ondelete="CASCADE"), sort_order=SHARED
    )
    workload_id: Mapped[int] = mapped_column(ForeignKey("workloads.id"), sort_order=SHARED)
    watch_id: Mapped[int | None] = mapped_column(
        ForeignKey("watches.id", ondelete="SET NULL"), index=True, sort_order=SHARED
    )


class GpuType(Row):
    """A GPU type defined by a user, beside the built-in catalog."""

    __tablename__ = "gpu_types"
    name: Mapped[str] = mapped_column(String(64), unique=True)
    spec: Mapped[dict[str, Any]]
    created_at: Mapped[datetime] = mapped_column(default=now)


class Cluster(Named):
    """A cluster; its inventory lives in immutable revisions."""

    __tablename__ = "clusters"
    head_revision: Mapped[int] = mapped_column(Integer, default=0, doc="Number of the current revision.")
    sync_source: Mapped[dict[str, Any] | None] = mapped_column(
        NullableDocument, doc="The scheduler its inventory is synced from (scheduler_inventory.sources), if any."
    )
    last_sync: Mapped[str] = mapped_column(String(256), default="", doc="What the last sync found.")
    last_synced_at: Mapped[datetime | None] = mapped_column(doc="When the last sync ran.")


class ClusterRevision(Snapshot):
    """A full inventory snapshot (pools, nodes, node states, fabric)."""

    __tablename__ = "cluster_revisions"
    parent = "cluster_id"
    cluster_id: Mapped[int] = parent_key("clusters")
    healthy_gpus: Mapped[int]
    total_gpus: Mapped[int]
    gpu_types: Mapped[list[str]] = mapped_column(
        Document,
        default=list,
        doc="The pools' GPU types in pool order, each once: the cluster list shows them without reading the "
        "inventory [issue 37 item 4].",
    )
    cause: Mapped[str] = mapped_column(String(256), default="", doc="What recorded it (import, node change...).")
    diff: Mapped[dict[str, Any] | None] = mapped_column(Document, doc="Against the previous revision.")
    recorded_at: Mapped[datetime] = mapped_column(default=now, index=True)


class Model(Named):
    """A model; its spec lives in versions."""

    __tablename__ = "models"
    head_version: Mapped[int] = mapped_column(Integer, default=0)


class ModelVersion(Snapshot):
    """One immutable version of a model spec."""

    __tablename__ = "model_versions"
    parent = "model_id"
    model_id: Mapped[int] = parent_key("models")
    parameters: Mapped[int] = mapped_column(BigInteger)
    num_layers: Mapped[int]
    is_moe: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(default=now)


class Workload(Row):
    """A training or serving workload; identical documents are stored once."""

    __tablename__ = "workloads"
    mode: Mapped[str] = mapped_column(String(16), index=True)
    spec: Mapped[dict[str, Any]]
    content_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(default=now)


class Watch(Row):
    """A (cluster, model, workload, pins) to re-plan every night."""

    __tablename__ = "watches"
    name: Mapped[str] = mapped_column(String(128), unique=True)
    cluster_id: Mapped[int] = mapped_column(ForeignKey("clusters.id", ondelete="CASCADE"), index=True)
    model_id: Mapped[int] = mapped_column(ForeignKey("models.id", ondelete="CASCADE"), index=True)
    workload_id: Mapped[int] = mapped_column(ForeignKey("workloads.id"))
    search: Mapped[dict[str, Any]] = mapped_column(doc="Pins, GPU budget, pools, schedules.")
    objective: Mapped[str] = mapped_column(String(32))
    time_limit_s: Mapped[float] = mapped_column(Float)
    last_plan_id: Mapped[int | None] = mapped_column(ForeignKey("plans.id", use_alter=True, ondelete="SET NULL"))
    last_checked_at: Mapped[datetime | None]
    last_check: Mapped[str] = mapped_column(String(256), default="", doc="What the last nightly check found.")
    switch_threshold_pct: Mapped[float | None] = mapped_column(
        Float, doc="Percent a re-plan's new layout must gain to replace the running one; None: the default (5)."
    )
    created_at: Mapped[datetime] = mapped_column(default=now)


class Job(JobInputs):
    """One planning job: its exact inputs, its state and live progress."""

    __tablename__ = "jobs"
    __table_args__ = (
        UniqueConstraint("client", "idempotency_key"),
        Index("ix_jobs_status_created_at", "status", "created_at"),
        NEVER_REUSE_IDS,
    )
    warm_start_plan_id: Mapped[int | None] = mapped_column(ForeignKey("plans.id", use_alter=True, ondelete="SET NULL"))
    search: Mapped[dict[str, Any]] = mapped_column(doc="Pins, GPU budget, pools, schedules.")
    objective: Mapped[str] = mapped_column(String(32))
    time_limit_s: Mapped[float] = mapped_column(Float)
    top_k: Mapped[int] = mapped_column(Integer, default=3)
    status: Mapped[str] = mapped_column(String(16), default="queued", index=True)
    best_objective: Mapped[float | None] = mapped_column(Float)
    bound: Mapped[float | None] = mapped_column(Float)
    elapsed_s: Mapped[float | None] = mapped_column(Float)
    candidates_solved: Mapped[int | None]
    error: Mapped[str | None] = mapped_column(Text)
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    attempts: Mapped[int] = mapped_column(Integer, default=0, doc="Times a worker started it.")
    client: Mapped[str] = mapped_column(String(128), default="", doc="Submitting client (token name).")
    idempotency_key: Mapped[str | None] = mapped_column(String(128))
    request_hash: Mapped[str] = mapped_column(String(64), default="")
    trigger: Mapped[str] = mapped_column(String(32), default="user", index=True)
    calibration_id: Mapped[int | None] = mapped_column(
        ForeignKey("calibrations.id", ondelete="SET NULL"), doc="The cluster calibration it plans with (None: none)."
    )
    created_at: Mapped[datetime] = mapped_column(default=now, index=True)
    started_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]
    progress_at: Mapped[datetime | None]
    heartbeat_at: Mapped[datetime | None] = mapped_column(doc="Written by the solving worker every few seconds.")
    # Read-only links to the input rows: a job just submitted keeps the rows it was built from, so answering it
    # reads their numbers and workload from the session instead of three more queries.
    cluster_revision: Mapped[ClusterRevision] = relationship(viewonly=True, lazy="select")
    model_version: Mapped[ModelVersion] = relationship(viewonly=True, lazy="select")
    workload: Mapped[Workload] = relationship(viewonly=True, lazy="select")


# The input columns a plan copies from its job (the same names on both tables).
JOB_INPUTS = tuple(JobInputs.__annotations__)


def job_inputs(job: Job) -> dict[str, int | None]:
    """A job's input row ids, as its plan records them."""
    return {name: getattr(job, name) for name in JOB_INPUTS}


class Plan(JobInputs):
    """A planning result, linked to its job, its inputs and the previous plan of the same watch."""

    __tablename__ = "plans"
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), unique=True, sort_order=PARENT_KEY)
    previous_plan_id: Mapped[int | None] = mapped_column(ForeignKey("plans.id", ondelete="SET NULL"))
    trigger: Mapped[str] = mapped_column(String(32), index=True)
    solver_status: Mapped[str] = mapped_column(String(16))
    objective: Mapped[str] = mapped_column(String(32))
    objective_value: Mapped[float | None] = mapped_column(Float)
    step_time_s: Mapped[float | None] = mapped_column(Float, index=True)
    gap: Mapped[float | None] = mapped_column(Float)
    gpus: Mapped[int | None]
    mfu: Mapped[float | None] = mapped_column(Float)
    peak_memory_gb: Mapped[float | None] = mapped_column(Float)
    summary: Mapped[str] = mapped_column(String(256), default="")
    calibration_id: Mapped[int | None] = mapped_column(
        ForeignKey("calibrations.id", ondelete="SET NULL"), doc="The cluster calibration it was planned with."
    )
    diff: Mapped[dict[str, Any] | None] = mapped_column(Document, doc="Against previous_plan_id.")
    created_at: Mapped[datetime] = mapped_column(default=now, index=True)
    document: Mapped[PlanDocument] = relationship(cascade="all, delete-orphan", lazy="select")

    @property
    def result(self) -> dict[str, Any]:
        """The planner's PlanResult as stored (loaded on first use)."""
        return self.document.result


class PlanDocument(Base):
    """A plan's full planner result, in its own table so that plan lists never read it: SQLite keeps a row's
    columns in order, and a 20-50 kB result stored before created_at sent every history row through its
    overflow pages (40% of the server's time at 50 clients) [issue 16]."""

    __tablename__ = "plan_documents"
    plan_id: Mapped[int] = mapped_column(ForeignKey("plans.id", ondelete="CASCADE"), primary_key=True)
    result: Mapped[dict[str, Any]] = mapped_column(doc="The planner's PlanResult: plan, alternatives, explanation.")


class Measurement(Row):
    """What a run measured, against a plan (its configuration, inventory revision, model version, workload)."""

    __tablename__ = "measurements"
    plan_id: Mapped[int] = mapped_column(ForeignKey("plans.id", ondelete="CASCADE"), index=True)
    cluster_id: Mapped[int] = mapped_column(ForeignKey("clusters.id", ondelete="CASCADE"), index=True)
    config: Mapped[dict[str, Any]] = mapped_column(doc="The ParallelConfig that ran.")
    figures: Mapped[dict[str, Any]] = mapped_column(
        doc="The Measurement document (optimizer/calibration/measurements.py)."
    )
    step_time_s: Mapped[float | None] = mapped_column(Float, doc="Measured seconds per step (training).")
    predicted_step_time_s: Mapped[float | None] = mapped_column(Float, doc="Uncalibrated prediction.")
    peak_allocated_gb: Mapped[float | None] = mapped_column(Float)
    predicted_memory_gb: Mapped[float | None] = mapped_column(Float, doc="Predicted peak allocated per GPU.")
    source: Mapped[str] = mapped_column(String(16), default="manual")
    breakdown: Mapped[dict[str, Any] | None] = mapped_column(
        NullableDocument,
        doc="A profiler trace's breakdown per rank and step (optimizer/calibration/trace_measurement.py), if the "
        "measurement came from one.",
    )
    created_at: Mapped[datetime] = mapped_column(default=now, index=True)


class Calibration(Row):
    """A fitted calibration of a cluster (numbered versions; the newest is the cluster's current one)."""

    __tablename__ = "calibrations"
    __table_args__ = (UniqueConstraint("cluster_id", "number"), NEVER_REUSE_IDS)
    cluster_id: Mapped[int] = mapped_column(ForeignKey("clusters.id", ondelete="CASCADE"), index=True)
    number: Mapped[int]
    constants: Mapped[dict[str, Any]] = mapped_column(doc="ClusterCalibration document: constants per pool.")
    report: Mapped[dict[str, Any]] = mapped_column(doc="The fit's evidence (optimizer/calibration_fit.FitReport).")
    measurements: Mapped[int] = mapped_column(Integer, doc="Measurements it was fitted to.")
    change: Mapped[float] = mapped_column(Float, default=0.0, doc="Largest relative change against the previous.")
    created_at: Mapped[datetime] = mapped_column(default=now, index=True)


ACCEPTANCE_KINDS = ("nccl-tests", "gemm")


class AcceptanceTest(Row):
    """A pool's acceptance test as its tool printed it (nccl-tests, a mamf-finder GEMM sweep), parsed [issue 33]."""

    __tablename__ = "acceptance_tests"
    cluster_id: Mapped[int] = mapped_column(ForeignKey("clusters.id", ondelete="CASCADE"), index=True)
    pool: Mapped[str] = mapped_column(String(64), doc="The pool it ran on.")
    kind: Mapped[str] = mapped_column(String(16), doc="nccl-tests or gemm.")
    subject: Mapped[str] = mapped_column(String(32), doc="The collective (nccl-tests) or the dtype (gemm).")
    figures: Mapped[dict[str, Any]] = mapped_column(
        doc="The parsed run (optimizer/calibration/nccl_tests.NcclTestRun or gemm_bench.GemmBenchRun)."
    )
    raw: Mapped[str] = mapped_column(Text, doc="The output as posted.")
    note: Mapped[str] = mapped_column(String(2000), default="", doc="File name or free text.")
    created_at: Mapped[datetime] = mapped_column(default=now, index=True)


class ApiToken(Row):
    """A bearer token, stored as its SHA-256."""

    __tablename__ = "api_tokens"
    name: Mapped[str] = mapped_column(String(128))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    scopes: Mapped[str] = mapped_column(String(64), doc="Comma-separated: read, write.")
    revoked: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(default=now)
    last_used_at: Mapped[datetime | None]


class ChangeGeneration(Row):
    """One row (id 1) whose counter moves with every commit that can alter a cached read, on SQLite (PostgreSQL
    publishes with NOTIFY instead); see store.changes."""

    __tablename__ = "change_generations"
    n: Mapped[int] = mapped_column(BigInteger, default=0, doc="Published commits so far (a count, no unit).")
