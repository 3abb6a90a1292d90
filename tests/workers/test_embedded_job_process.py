"""Embedded mode runs jobs in a child process of the API (issue 49): a job's solve is not on the API's interpreter,
and a child killed mid-job is taken over as a dead worker's job is (its lease expires, the job is sent again)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator

import pytest

from service.jobs import submit
from store.db import Database
from store.repositories.jobs import LEASE_S, TAKEOVER_CHECK_S, JobRepository
from store.settings import Settings
from tests.factories import cluster_and_model, long_training_request, training_request
from workers.dispatch import InProcessDispatcher


@pytest.fixture
def dispatcher(sqlite_url: str) -> Iterator[InProcessDispatcher]:
    db = Database(sqlite_url)
    d = InProcessDispatcher(db, Settings(database_url=sqlite_url, embedded_jobs="process"))
    d.start()
    yield d
    d.shutdown()
    db.dispose()


def _status(db: Database, job_id: int) -> tuple[str, int]:
    with db.session() as s:
        job = JobRepository(s).get(job_id)
        return job.status, job.attempts


def _wait_for(db: Database, job_id: int, statuses: set[str], within_s: float) -> str:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        status, _ = _status(db, job_id)
        if status in statuses:
            return status
        time.sleep(0.1)
    raise AssertionError(f"job {job_id} still {_status(db, job_id)} after {within_s} s")


def _children(d: InProcessDispatcher) -> list[int]:
    procs = getattr(d.pool, "_processes", None) or {}
    return [p.pid for p in procs.values() if p.is_alive() and p.pid is not None]


def test_a_job_runs_in_a_child_process_and_stores_its_plan(dispatcher: InProcessDispatcher) -> None:
    db = dispatcher.db
    assert dispatcher.processes
    with db.session() as s:
        cluster, model = cluster_and_model(s)
        job, _ = submit(s, training_request(cluster, model))
    dispatcher.enqueue(job.id)
    assert _wait_for(db, job.id, {"succeeded", "failed"}, 60) == "succeeded"
    children = _children(dispatcher)
    assert children and os.getpid() not in children  # the solve ran outside this interpreter
    with db.session() as s:
        assert JobRepository(s).get(job.id).attempts == 1


def test_a_child_killed_mid_job_is_taken_over_after_its_lease(dispatcher: InProcessDispatcher) -> None:
    db = dispatcher.db
    with db.session() as s:
        _, req = long_training_request(s)
        job, _ = submit(s, req.model_copy(update={"time_limit_s": 3.0}))
    dispatcher.enqueue(job.id)
    _wait_for(db, job.id, {"running"}, 60)
    (pid,) = _children(dispatcher)
    os.kill(pid, signal.SIGKILL)
    killed = time.monotonic()
    # Taken over within the lease and one watch tick (+ a second of slack), then solved (3 s limit) by a new child.
    assert _wait_for(db, job.id, {"succeeded", "failed"}, LEASE_S + TAKEOVER_CHECK_S + 45) == "succeeded"
    status, attempts = _status(db, job.id)
    assert attempts == 2, (status, attempts)
    assert time.monotonic() - killed >= LEASE_S - 1  # not before its lease expired: the job was not solved twice
    assert pid not in _children(dispatcher)


def test_a_shutdown_with_jobs_still_queued_returns(sqlite_url: str) -> None:
    """The app's lifespan ends while jobs wait behind a running one: shutdown cancels them and returns (cancelling
    ran their done-callbacks under the dispatcher's lock, which they take: the session's teardown hung)."""
    import threading

    db = Database(sqlite_url)
    d = InProcessDispatcher(db, Settings(database_url=sqlite_url, embedded_jobs="thread"))
    d.start()
    release = threading.Event()
    d.pool.submit(release.wait, 30)  # the job running now
    with db.session() as s:
        cluster, model = cluster_and_model(s)
        queued = [submit(s, training_request(cluster, model))[0].id for _ in range(2)]
    for job_id in queued:
        d.enqueue(job_id)
    assert d.waiting() == set(queued)
    stopper = threading.Thread(target=d.shutdown, daemon=True)
    stopper.start()
    stopper.join(10)
    release.set()
    alive = stopper.is_alive()
    db.dispose()
    assert not alive, "shutdown blocked on its own lock"
    assert d.waiting() == set()  # the queued jobs were cancelled (the next start recovers them)
