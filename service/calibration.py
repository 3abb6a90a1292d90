"""Measurements in, per-cluster calibration out [issue 14].

A measurement is recorded against a plan: the plan names the configuration, the inventory revision, the model
version and the workload that ran. Fitting a cluster's calibration prices every measurement of the cluster again
(optimizer/calibration/fit.py) and stores a new numbered version when a constant moved; jobs plan with the
cluster's newest version unless asked not to, and record which one they used.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from optimizer.calibration.fit import FitPoint, FitReport, fit_calibration
from optimizer.calibration.measurements import Measurement
from optimizer.costmodel.estimate import estimate
from optimizer.errors import DomainError
from optimizer.frameworks.validation import assign_pools
from optimizer.spec.calibration import change_between
from optimizer.spec.names import named_framework
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import TrainingWorkload
from service.acceptance import acceptance_priors
from service.plans import Specs, planned, specs_of
from store.models import Calibration, Plan
from store.models import Measurement as MeasurementRow
from store.repositories.acceptance import AcceptanceTestRepository
from store.repositories.measurements import CalibrationRepository, MeasurementRepository, calibration_spec
from store.repositories.plans import PlanRepository

# A constant that moved by less than this is not a new calibration (a refit on the same evidence).
SAME_CALIBRATION = 0.002
# A fit uses the cluster's newest measurements, at most this many.
MAX_FIT_MEASUREMENTS = 2_000


@dataclass(frozen=True)
class Comparison:
    """A measurement next to what was predicted for it."""

    row: MeasurementRow
    measurement: Measurement
    planned_step_s: float | None  # as the plan predicted it (with the calibration the plan used)
    uncalibrated_step_s: float | None
    calibrated_step_s: float | None  # with the cluster's current calibration
    measured_step_s: float | None

    @property
    def error(self) -> float | None:
        """The plan's prediction against the measurement, relative."""
        if self.planned_step_s is None or not self.measured_step_s:
            return None
        return self.planned_step_s / self.measured_step_s - 1

    @property
    def flagged(self) -> bool:
        """More than 20% from the plan's prediction [issue 14]."""
        return self.error is not None and abs(self.error) > 0.20


def _config(plan: Plan) -> ParallelConfig:
    best = planned(plan)
    if best is None:
        raise DomainError("plan", f"plan {plan.id} is {plan.solver_status}: it has no configuration to measure")
    return best.config


def record_measurement(
    s: Session,
    plan_id: int,
    m: Measurement,
    cluster_id: int | None = None,
    breakdown: dict[str, Any] | None = None,
) -> MeasurementRow:
    """Store what a run of plan `plan_id` measured (checked against the plan's workload and GPU, and against the
    cluster the caller says it ran on, `cluster_id`, when given), with a profiler trace's breakdown if it came
    from one."""
    plan = PlanRepository(s).get(plan_id)
    if cluster_id is not None and cluster_id != plan.cluster_id:
        raise DomainError(
            "cluster_id",
            f"the run ran on cluster {cluster_id}, but plan {plan.id} is a plan of cluster {plan.cluster_id}: record "
            f"it against a plan of cluster {cluster_id} (a reported configuration, search.ran, makes one)",
        )
    config = _config(plan)
    specs = specs_of(s, plan)
    gpu_gb = min(specs.cluster.gpu_of(p).memory_bytes for p in assign_pools(specs.cluster, config)) / 1e9
    m.check_against(specs.workload, gpu_gb)
    est = estimate(specs.model, specs.cluster, specs.workload, config)
    row = MeasurementRow(
        plan_id=plan.id,
        cluster_id=plan.cluster_id,
        config=config.model_dump(mode="json"),
        figures=m.model_dump(mode="json", exclude_none=True),
        step_time_s=m.training_step_time(specs.workload),
        predicted_step_time_s=est.step_time_s if est.mode == "training" else None,
        peak_allocated_gb=m.peak_allocated_gb,
        predicted_memory_gb=est.peak_allocated_gb if est.stages else None,
        source=m.source,
        breakdown=breakdown,
    )
    return MeasurementRepository(s).add(row)


def _points(s: Session, cluster_id: int) -> list[FitPoint]:
    specs: dict[int, Specs] = {}
    points = []
    for row, plan in MeasurementRepository(s).of_cluster(cluster_id, MAX_FIT_MEASUREMENTS):
        sp = specs.get(plan.id)
        if sp is None:
            sp = specs[plan.id] = specs_of(s, plan)
        if not isinstance(sp.workload, TrainingWorkload):
            continue  # serving measurements are compared, not fitted (issue 17's serving model)
        figures = Measurement.model_validate(row.figures)
        points.append(
            FitPoint(
                label=f"measurement {row.id} (plan {plan.id})",
                model=sp.model,
                cluster=sp.cluster,
                workload=figures.with_release(sp.workload),
                config=ParallelConfig.model_validate(row.config),
                step_time_s=row.step_time_s,
                peak_allocated_gb=figures.peak_allocated_gb,
                peak_reserved_gb=figures.peak_reserved_gb,
                unmodelled=figures.unmodelled_reason(named_framework(sp.workload.framework)),
            )
        )
    return points


def fit_cluster(s: Session, cluster_id: int) -> FitReport:
    """Fit the cluster's calibration to its measurements, starting from its acceptance tests' figures where a pool
    has them [issue 33] (not stored)."""
    points = _points(s, cluster_id)
    priors = acceptance_priors(s, cluster_id)
    if not points and not priors:
        raise DomainError(
            "cluster_id",
            f"cluster {cluster_id} has no training measurements or acceptance tests to calibrate with",
        )
    return fit_calibration(points, priors)


@dataclass(frozen=True)
class Recalibration:
    """A refit: the cluster's current calibration row, whether the refit created it, and the refit's own report
    (the measurements it used, whether or not a new version was stored)."""

    row: Calibration
    created: bool
    report: FitReport


def recalibrate(s: Session, cluster_id: int) -> Recalibration:
    """Fit and store a new calibration version when a constant moved."""
    report = fit_cluster(s, cluster_id)
    repo = CalibrationRepository(s)
    current = repo.current(cluster_id)
    change = change_between(calibration_spec(current), report.calibration)
    if current is not None and change < SAME_CALIBRATION:
        return Recalibration(current, False, report)
    row = Calibration(
        cluster_id=cluster_id,
        constants=report.calibration.model_dump(mode="json", exclude={"version"}),
        report=report.model_dump(mode="json", exclude={"calibration"}),
        measurements=report.measurements,
        change=change,
    )
    return Recalibration(repo.add(row), True, report)


def recalibrate_stale(s: Session, cluster_id: int | None = None) -> list[int]:
    """Refit every cluster (or one) that has measurements or acceptance tests newer than its current calibration
    (the nightly pass). Returns the clusters whose calibration changed."""
    changed = []
    newest_evidence: dict[int, datetime] = {}
    for cid, newest in [
        *MeasurementRepository(s).newest_by_cluster(cluster_id),
        *AcceptanceTestRepository(s).newest_by_cluster(cluster_id),
    ]:
        newest_evidence[cid] = max(newest, newest_evidence.get(cid, newest))
    for cid, newest in sorted(newest_evidence.items()):
        current = CalibrationRepository(s).current(cid)
        if current is not None and current.created_at >= newest:
            continue
        try:
            with s.begin_nested():
                created = recalibrate(s, cid).created
        except DomainError:
            continue
        if created:
            changed.append(cid)
    return changed


def comparisons(s: Session, plan: Plan, rows: list[MeasurementRow] | None = None) -> list[Comparison]:
    """The plan's measurements (or `rows` of them) with its prediction, the uncalibrated and the currently
    calibrated ones."""
    rows = MeasurementRepository(s).of_plan(plan.id) if rows is None else rows
    if not rows:
        return []
    specs = specs_of(s, plan)
    current = calibration_spec(CalibrationRepository(s).current(plan.cluster_id))
    calibrated_cluster = specs.cluster.with_calibration(current) if current is not None else None
    out = []
    for row in rows:
        calibrated = None
        if calibrated_cluster is not None and isinstance(specs.workload, TrainingWorkload):
            cfg = ParallelConfig.model_validate(row.config)
            calibrated = estimate(specs.model, calibrated_cluster, specs.workload, cfg).step_time_s
        out.append(
            Comparison(
                row=row,
                measurement=Measurement.model_validate(row.figures),
                planned_step_s=plan.step_time_s,
                uncalibrated_step_s=row.predicted_step_time_s,
                calibrated_step_s=calibrated,
                measured_step_s=row.step_time_s,
            )
        )
    return out


@dataclass(frozen=True)
class MeasuredPoint:
    """One training measurement of a cluster with its two predictions."""

    measurement_id: int
    plan_id: int
    measured_s: float
    uncalibrated_s: float | None  # the sourced constants
    planned_s: float | None  # the plan's, with the calibration it used


def cluster_points(s: Session, cluster_id: int) -> list[MeasuredPoint]:
    """Predicted (sourced constants and as planned) vs measured for every training measurement of a cluster,
    oldest first: the cluster page's plot."""
    return [
        MeasuredPoint(row.id, plan.id, row.step_time_s, row.predicted_step_time_s, plan.step_time_s)
        for row, plan in MeasurementRepository(s).of_cluster(cluster_id, MAX_FIT_MEASUREMENTS)
        if row.step_time_s is not None
    ]
