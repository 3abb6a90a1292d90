"""Deleting a cluster deletes its jobs; a running one's solver stops as a cancelled one does, instead of running on
to its time limit (issue 37 item 6)."""

from __future__ import annotations

import threading
import time

from service.jobs import run_job, submit
from store.db import Database
from store.repositories.clusters import ClusterRepository
from store.repositories.jobs import JobRepository
from tests.factories import long_training_request


def test_deleting_a_cluster_stops_its_running_solver_within_a_second(db: Database) -> None:
    with db.session() as s:
        cluster, req = long_training_request(s)
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
