"""A profiler trace recorded as a measurement of a plan: the step time and phases in the measurement, the whole
per-rank breakdown stored beside it, and the plan's estimate of the same phases to compare [issue 54 §2]."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from optimizer.calibration.trace_files import read_trace_upload
from optimizer.calibration.trace_measurement import measure_trace
from optimizer.calibration.trace_priced import priced_phases
from optimizer.costmodel.estimate import estimate
from optimizer.spec.parallel_config import ParallelConfig
from service.calibration import record_measurement
from service.plans import specs_of
from store.models import Measurement as MeasurementRow
from store.repositories.plans import PlanRepository


@dataclass(frozen=True)
class RecordedTrace:
    row: MeasurementRow
    breakdown: dict[str, Any]
    priced_phases_s: dict[str, float]


def record_trace(s: Session, plan_id: int, body: bytes, note: str = "", cluster_id: int | None = None) -> RecordedTrace:
    """Read the uploaded trace (a DomainError names what is wrong with it, before anything is stored) and store it."""
    plan = PlanRepository(s).get(plan_id)
    traced = measure_trace(read_trace_upload(body), note)
    row = record_measurement(s, plan_id, traced.measurement, cluster_id, traced.breakdown)
    specs = specs_of(s, plan)
    est = estimate(specs.model, specs.cluster, specs.workload, ParallelConfig.model_validate(row.config))
    return RecordedTrace(row, traced.breakdown, priced_phases(est.breakdown))
