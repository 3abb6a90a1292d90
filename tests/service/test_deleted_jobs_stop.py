"""Deleting a cluster deletes its jobs; a running one's solver stops as a cancelled one does, instead of running on
to its time limit (issue 37 item 6)."""

from __future__ import annotations

import threading
import time

from optimizer.spec.model_loading import load_model_preset
from optimizer.spec.workload import TrainingWorkload
from service.catalog import create_cluster, create_model
from service.job_requests import JobRequest
from service.jobs import run_job, submit
from store.db import Database
from store.repositories.clusters import ClusterRepository
from store.repositories.jobs import JobRepository
from tests.factories import hetero_cluster, unique


def test_deleting_a_cluster_stops_its_running_solver_within_a_second(db: Database) -> None:
    with db.session() as s:
        cluster, _ = create_cluster(s, unique("hetero"), hetero_cluster(pools=5))  # solves for tens of seconds
        _, model_v = create_model(s, unique("m"), load_model_preset("llama-2-70b"))
        req = JobRequest.model_validate(
            {
                "cluster_id": cluster.id,
                "model_id": model_v.model_id,
                "workload": TrainingWorkload(global_batch_size=512, seq_len=4096).model_dump(),
                "time_limit_s": 120,
            }
        )
        job, _ = submit(s, req)
    outcome: list[str] = []
    t = threading.Thread(target=lambda: outcome.append(run_job(db, job.id)))
    t.start()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with db.session() as s:
            if JobRepository(s).get(job.id).status == "running":
                break
        time.sleep(0.05)
    time.sleep(0.2)  # the solver is under way
    with db.session() as s:
        ClusterRepository(s).delete(cluster.id)  # what DELETE /v1/clusters/{id} does
    asked = time.monotonic()
    t.join(timeout=10)
    stopped_after = time.monotonic() - asked
    assert outcome == ["cancelled"], outcome
    assert stopped_after < 1.5, stopped_after  # 0.5 s poll + the solver's stop + completion
    with db.session() as s:
        assert JobRepository(s).find(job.id) is None
