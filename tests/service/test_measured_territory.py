"""A job plans with the configurations its model was measured at on its cluster: the interval rule's territory."""

from __future__ import annotations

from sqlalchemy.orm import Session

from optimizer.calibration.measurements import Measurement
from optimizer.spec.parallel_config import ParallelConfig
from service.calibration import record_measurement
from service.jobs import load_inputs, run_job, submit
from store.db import Database
from store.models import Cluster, Model
from store.repositories.jobs import JobRepository
from store.repositories.plans import PlanRepository
from tests.factories import cluster_and_model, training_request


def test_a_job_carries_its_clusters_measured_configurations(db: Database) -> None:
    with db.session() as s:
        cluster, model = cluster_and_model(s)
        first, _ = submit(s, training_request(cluster, model))
        first_id, cluster_id, model_id = first.id, cluster.id, model.id
    assert run_job(db, first_id) == "succeeded"
    with db.session() as s:
        plan = PlanRepository(s).by_job(first_id)
        assert plan is not None
        ran = ParallelConfig.model_validate(plan.result["plan"]["config"])
        record_measurement(s, plan.id, Measurement(step_time_s=plan.step_time_s * 1.1))
    with db.session() as s:
        cluster, model = cluster_and_model(s)  # another cluster: its jobs know none of these runs
        other, _ = submit(s, training_request(cluster, model))
        again, _ = submit(s, training_request(*_rows(s, cluster_id, model_id), gbs=128))
        jobs = JobRepository(s)
        assert load_inputs(s, jobs.get(again.id)).measured == (ran,)
        assert load_inputs(s, jobs.get(other.id)).measured == ()


def _rows(s: Session, cluster_id: int, model_id: int) -> tuple[Cluster, Model]:
    cluster, model = s.get(Cluster, cluster_id), s.get(Model, model_id)
    assert cluster is not None and model is not None
    return cluster, model
