"""Take-over after a database outage, one message per queued job, taken-over jobs first [issue 47 item 2].

The lease watch's look runs against the real PostgreSQL (and a closed port for the outage); the queue tests send
real messages to a Redis server of their own and read them back as a worker's consumer does (kombu's Redis
channel), so that nothing here disturbs the machine's servers."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
import redis
from kombu import Connection, Consumer, Queue

from service.jobs import submit
from store.db import Database
from store.repositories.jobs import LEASE_S, JobRepository
from store.settings import Settings
from tests.factories import cluster_and_model, training_request, unique
from tests.sent import Sent
from tests.workers.conftest import Proc
from workers import names
from workers import service as workers_service
from workers.celery_app import make_celery
from workers.dispatch import CeleryDispatcher, _job_of
from workers.lease_watch import Reachability, tick

pytestmark = pytest.mark.usefixtures("no_leftover_jobs")


def _closed_port_url(url: str) -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    parts = urlsplit(url)
    user = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else ""
    return urlunsplit(parts._replace(netloc=f"{user}127.0.0.1:{port}"))


@pytest.fixture
def running_job(worker_db: Database) -> int:
    """A job claimed by a worker whose heartbeats an outage stopped (its lease expired)."""
    with worker_db.session() as s:
        cluster, model = cluster_and_model(s)
        job, _ = submit(s, training_request(cluster, model))
    with worker_db.session() as s:
        jobs = JobRepository(s)
        assert jobs.claim(job.id)
        jobs.get(job.id).heartbeat_at = datetime.now(UTC) - timedelta(seconds=LEASE_S + 8)
    return int(job.id)


def test_no_take_over_until_the_database_has_answered_for_a_full_lease(
    worker_db: Database, running_job: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = [100.0]
    gate, sent = Reachability(lambda: clock[0]), Sent()
    down = Database(_closed_port_url(worker_db.url))
    monkeypatch.setattr(workers_service, "database", lambda: down)
    assert tick(gate, sent) == [] and gate.since is None  # the outage: nothing looked at
    monkeypatch.setattr(workers_service, "database", lambda: worker_db)
    clock[0] += 2
    assert tick(gate, sent) == []  # back, but the lease expired only because of the outage
    clock[0] += LEASE_S - 0.5
    assert tick(gate, sent) == []
    with worker_db.session() as s:
        JobRepository(s).heartbeat(running_job)  # its worker beat again once the database was back: alive
        assert JobRepository(s).get(running_job).status == "running"
    clock[0] += 0.5
    assert tick(gate, sent) == [] and sent.sent == []  # a full lease reachable: the live worker kept its job
    with worker_db.session() as s:
        JobRepository(s).get(running_job).heartbeat_at = datetime.now(UTC) - timedelta(seconds=LEASE_S + 1)
    assert tick(gate, sent) == [running_job]  # now it is a dead worker's: taken over, sent ahead of new work
    assert sent.sent == [(running_job, True)]
    down.dispose()


@pytest.fixture
def own_redis(private_redis: Callable[[], Proc]) -> Iterator[str]:
    server = private_redis()
    yield f"redis://127.0.0.1:{server.port}/0"  # type: ignore[attr-defined]


def _app(url: str, db_url: str) -> Any:
    return make_celery(Settings(database_url=db_url, redis_url=url))


def test_a_taken_over_job_is_delivered_before_new_work(own_redis: str, worker_db: Database) -> None:
    app = _app(own_redis, worker_db.url)
    dispatcher = CeleryDispatcher(Settings(database_url=worker_db.url, redis_url=own_redis), app)
    for job_id in (1, 2, 3):
        dispatcher.enqueue(job_id)
    dispatcher.enqueue(4, ahead=True)  # taken over from a dead worker after three new jobs were queued
    order: list[int] = []
    opts = app.conf.broker_transport_options
    with Connection(own_redis, transport_options=opts) as conn:
        queues = [Queue(q) for q in names.QUEUES]  # what a worker consumes, in the app's order
        with Consumer(conn, queues, accept=["json"], callbacks=[lambda body, m: (order.append(body[0][0]), m.ack())]):
            for _ in range(4):
                conn.drain_events(timeout=5)
    assert [q.name for q in app.conf.task_queues] == list(names.QUEUES)
    assert order == [4, 1, 2, 3]


def test_the_sweep_does_not_send_a_job_whose_message_waits(
    own_redis: str, worker_db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    with worker_db.session() as s:
        cluster, model = cluster_and_model(s)
        job, _ = submit(s, training_request(cluster, model))
        job.created_at = datetime.now(UTC) - timedelta(hours=1)  # queued far longer than sweep_after_s
    cfg = Settings(database_url=worker_db.url, redis_url=own_redis)
    dispatcher = CeleryDispatcher(cfg, _app(own_redis, worker_db.url))
    monkeypatch.setattr(workers_service, "database", lambda: worker_db)
    monkeypatch.setattr(workers_service, "settings", lambda: cfg)
    dispatcher.enqueue(job.id)
    assert job.id in (dispatcher.waiting() or set())
    assert job.id not in workers_service.sweep(dispatcher)  # its message waits behind the backlog: not sent twice
    assert redis.Redis.from_url(own_redis).llen(names.DEFAULT_QUEUE) == 1
    redis.Redis.from_url(own_redis).flushdb()  # the broker lost it (restarted without persistence)
    assert job.id in workers_service.sweep(dispatcher)
    assert dispatcher.waiting() == {job.id}


def test_a_committed_job_never_sent_goes_at_start_up_and_on_its_idempotent_retry(
    own_redis: str, worker_db: Database
) -> None:
    """An API process killed between a job's commit and its send left it queued with no message: the next API
    process sends it as it starts, and a retry with the same Idempotency-Key sends it again if the broker lost it
    (it waited 189 s for the sweep); a retry whose message still waits sends nothing [issue 59 item 2]."""
    import time

    from fastapi.testclient import TestClient

    from api.app import create_app
    from store.repositories.tokens import TokenRepository

    with worker_db.session() as s:
        cluster, model = cluster_and_model(s)
        _row, token = TokenRepository(s).create(unique("unsent"), ["write"])
        req = training_request(cluster, model)
        job, _ = submit(s, req, client=f"token:{_row.id}", idempotency_key="unsent-1")  # committed, never sent
    cfg = Settings(database_url=worker_db.url, redis_url=own_redis)
    dispatcher = CeleryDispatcher(cfg, _app(own_redis, worker_db.url))
    broker = redis.Redis.from_url(own_redis)
    broker.flushdb()  # the module's other tests' messages
    with TestClient(create_app(cfg, worker_db, dispatcher)) as client:
        deadline = time.monotonic() + 10
        while job.id not in (dispatcher.waiting() or set()) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert job.id in (dispatcher.waiting() or set()), "not sent at start-up"
        body = req.model_dump(mode="json", exclude_none=True)
        headers = {"Authorization": f"Bearer {token}", "Idempotency-Key": "unsent-1"}
        again = client.post("/v1/jobs", json=body, headers=headers)
        assert again.status_code == 202 and again.json()["id"] == job.id, again.text
        client.app.state.sender.flush(10)  # type: ignore[attr-defined]
        queued = [_job_of(m) for m in broker.lrange(names.DEFAULT_QUEUE, 0, -1)]
        assert queued.count(job.id) == 1  # its message waits: not sent twice
        broker.flushdb()  # the broker lost it
        again = client.post("/v1/jobs", json=body, headers=headers)
        assert again.status_code == 202 and again.json()["id"] == job.id, again.text
        client.app.state.sender.flush(10)  # type: ignore[attr-defined]
        assert [_job_of(m) for m in broker.lrange(names.DEFAULT_QUEUE, 0, -1)] == [job.id]
