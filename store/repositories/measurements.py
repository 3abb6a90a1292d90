"""Measurements of runs against plans, and the cluster calibrations fitted to them."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from optimizer.spec.calibration import ClusterCalibration, change_between
from store.errors import NotFoundError
from store.models import Calibration, Measurement, Plan
from store.repositories.base import Repository


def calibration_spec(row: Calibration | None) -> ClusterCalibration | None:
    """The constants of a stored calibration (None for none)."""
    if row is None:
        return None
    return ClusterCalibration.model_validate({**row.constants, "version": row.number})


class MeasurementRepository(Repository[Measurement]):
    row_type, kind = Measurement, "measurement"

    def one_of_plan(self, plan_id: int, measurement_id: int) -> Measurement:
        """The measurement, when it is one of this plan's (else NotFoundError)."""
        row = self.find(measurement_id)
        if row is None or row.plan_id != plan_id:
            raise NotFoundError(self.kind, measurement_id)
        return row

    def of_plan(self, plan_id: int) -> list[Measurement]:
        q = select(Measurement).where(Measurement.plan_id == plan_id).order_by(Measurement.id)
        return list(self.s.scalars(q))

    def of_cluster(self, cluster_id: int, limit: int = 10_000) -> list[tuple[Measurement, Plan]]:
        """The cluster's measurements with their plans, oldest first (at most `limit`, the newest kept)."""
        q = (
            select(Measurement, Plan)
            .join(Plan, Plan.id == Measurement.plan_id)
            .where(Measurement.cluster_id == cluster_id)
            .order_by(Measurement.id.desc())
            .limit(limit)
        )
        return [(m, p) for m, p in reversed(self.s.execute(q).all())]

    def newest_by_cluster(self, cluster_id: int | None = None) -> list[tuple[int, datetime]]:
        """(cluster id, time of its newest measurement) for every cluster with measurements (or one)."""
        q = select(Measurement.cluster_id, func.max(Measurement.created_at)).group_by(Measurement.cluster_id)
        if cluster_id is not None:
            q = q.where(Measurement.cluster_id == cluster_id)
        return [(cid, newest) for cid, newest in self.s.execute(q).all()]


class CalibrationRepository:
    def __init__(self, session: Session) -> None:
        self.s = session

    def current(self, cluster_id: int) -> Calibration | None:
        q = select(Calibration).where(Calibration.cluster_id == cluster_id).order_by(Calibration.number.desc())
        return self.s.scalars(q.limit(1)).first()

    def find(self, calibration_id: int | None) -> Calibration | None:
        return self.s.get(Calibration, calibration_id) if calibration_id is not None else None

    def change(self, before_id: int | None, after_id: int | None) -> float:
        """The largest relative change of a constant between two stored calibrations (None: the sourced ones)."""
        return change_between(calibration_spec(self.find(before_id)), calibration_spec(self.find(after_id)))

    def history(self, cluster_id: int) -> list[Calibration]:
        q = select(Calibration).where(Calibration.cluster_id == cluster_id).order_by(Calibration.number)
        return list(self.s.scalars(q))

    def add(self, row: Calibration) -> Calibration:
        prev = self.current(row.cluster_id)
        row.number = (prev.number if prev else 0) + 1
        self.s.add(row)
        self.s.flush()
        return row
