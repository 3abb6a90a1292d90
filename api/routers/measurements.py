"""/v1/plans/{id}/measurements and /v1/clusters/{id}/calibrations: what runs measured, and the calibration fitted
to them [issue 14]."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Query

from api.convert import calibration_out, measurement_out
from api.deps import Reader, RowId, SessionDep, Writer
from api.responses import NOT_FOUND, STANDARD, WRITE
from api.schemas import CalibrateOut, CalibrationOut, MeasurementOut, TraceMeasurementOut
from optimizer.calibration.measurements import Measurement
from optimizer.calibration.run_logs import DEFAULT_WARMUP, LogFormatChoice, parse_log
from service.calibration import comparisons, recalibrate, record_measurement
from service.plans import planned, specs_of
from service.trace_measurements import record_trace
from store.models import MAX_ID, Plan
from store.models import Measurement as MeasurementRow
from store.repositories.clusters import ClusterRepository
from store.repositories.measurements import CalibrationRepository, MeasurementRepository
from store.repositories.plans import PlanRepository

router = APIRouter(tags=["measurements"], responses=STANDARD)
RanOn = Annotated[
    int | None,
    Query(ge=1, le=MAX_ID, description="The cluster the run ran on: checked against the plan's (422 when another)."),
]
RunLog = Annotated[str, Body(media_type="text/plain", description="A training log or serving benchmark output.")]
Trace = Annotated[
    bytes,
    Body(
        media_type="application/octet-stream",
        description="A PyTorch profiler (Kineto) trace: one rank's Chrome-trace JSON, plain or gzipped, or a tar "
        "(plain or gzipped) of one *.json / *.json.gz per rank. Send it as application/octet-stream (or "
        "application/gzip, application/x-tar): a JSON content type is read as a JSON body.",
    ),
]


def _out(s: SessionDep, plan: Plan, row: MeasurementRow) -> MeasurementOut:
    return measurement_out(comparisons(s, plan, [row])[0])


@router.post("/v1/plans/{plan_id}/measurements", status_code=201, response_model=MeasurementOut, responses=WRITE)
def add(plan_id: RowId, body: Measurement, s: SessionDep, _: Writer, cluster_id: RanOn = None) -> MeasurementOut:
    row = record_measurement(s, plan_id, body, cluster_id)
    return _out(s, PlanRepository(s).get(plan_id), row)


@router.post("/v1/plans/{plan_id}/measurements/log", status_code=201, response_model=MeasurementOut, responses=WRITE)
def add_log(
    plan_id: RowId,
    s: SessionDep,
    _: Writer,
    body: RunLog,
    format: Annotated[LogFormatChoice, Query(description="The log's format (auto: detected).")] = "auto",
    warmup: Annotated[int, Query(ge=0, le=100_000, description="Steps skipped at the start.")] = DEFAULT_WARMUP,
    note: Annotated[str, Query(max_length=2000)] = "",
    cluster_id: RanOn = None,
) -> MeasurementOut:
    plan = PlanRepository(s).get(plan_id)
    best = planned(plan)
    specs = specs_of(s, plan)
    parsed = parse_log(body, format, specs.workload, best.config.gpus if best else None, warmup)
    m = parsed.measurement.model_copy(update={"note": note}) if note else parsed.measurement
    row = record_measurement(s, plan_id, m, cluster_id)
    return _out(s, plan, row)


@router.post(
    "/v1/plans/{plan_id}/measurements/trace", status_code=201, response_model=TraceMeasurementOut, responses=WRITE
)
def add_trace(
    plan_id: RowId,
    s: SessionDep,
    _: Writer,
    body: Trace,
    note: Annotated[str, Query(max_length=2000)] = "",
    cluster_id: RanOn = None,
) -> TraceMeasurementOut:
    """A traced run: its step time (ProfilerStep wall time), its phases and the whole breakdown, stored together."""
    done = record_trace(s, plan_id, body, note, cluster_id)
    out = _out(s, PlanRepository(s).get(plan_id), done.row)
    return TraceMeasurementOut(**out.model_dump(), breakdown=done.breakdown, priced_phases_s=done.priced_phases_s)


@router.get("/v1/plans/{plan_id}/measurements", response_model=list[MeasurementOut], responses=NOT_FOUND)
def list_measurements(plan_id: RowId, s: SessionDep, _: Reader) -> list[MeasurementOut]:
    return [measurement_out(c) for c in comparisons(s, PlanRepository(s).get(plan_id))]


@router.delete("/v1/plans/{plan_id}/measurements/{measurement_id}", status_code=204, responses=NOT_FOUND)
def delete(plan_id: RowId, measurement_id: RowId, s: SessionDep, _: Writer) -> None:
    repo = MeasurementRepository(s)
    repo.delete(repo.one_of_plan(plan_id, measurement_id).id)


@router.post("/v1/clusters/{cluster_id}/calibrations", response_model=CalibrateOut, responses=NOT_FOUND)
def calibrate(cluster_id: RowId, s: SessionDep, _: Writer) -> CalibrateOut:
    ClusterRepository(s).get(cluster_id)
    done = recalibrate(s, cluster_id)
    return CalibrateOut(
        created=done.created,
        calibration=calibration_out(done.row),
        fit=done.report.model_dump(mode="json", exclude={"calibration"}),
    )


@router.get("/v1/clusters/{cluster_id}/calibrations", response_model=list[CalibrationOut], responses=NOT_FOUND)
def calibrations(cluster_id: RowId, s: SessionDep, _: Reader) -> list[CalibrationOut]:
    ClusterRepository(s).get(cluster_id)
    return [calibration_out(r) for r in CalibrationRepository(s).history(cluster_id)]
