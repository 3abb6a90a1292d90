"""Sending jobs to be run: to Celery when REDIS_URL is set, else to a thread inside this process (embedded mode).
Callers enqueue only after the transaction that created the job committed."""

from __future__ import annotations

import base64
import json
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from service.jobs import run_job
from store.db import Database
from store.settings import Settings
from workers import names

log = logging.getLogger("meshplan.dispatch")


class BrokerUnavailable(RuntimeError):
    """The broker did not take the message."""


class Dispatcher(Protocol):
    mode: str

    def enqueue(self, job_id: int, ahead: bool = False) -> None:
        """Send the job; `ahead`: before new work (a job taken over from a dead worker)."""
        ...

    def waiting(self) -> set[int] | None:
        """The jobs whose message the broker holds (queued, or reserved by a worker); None when it cannot tell."""
        ...

    def problem(self) -> str | None:
        """None when jobs can be sent, else why not."""
        ...

    def shutdown(self) -> None: ...


class InProcessDispatcher:
    """Embedded mode: one background thread runs the jobs, through the same service code as a worker."""

    mode = "in-process"

    def __init__(self, db: Database, cfg: Settings) -> None:
        self.db, self.cfg = db, cfg
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="meshplan-job")
        self.stopped = False
        self.users = 0
        self._waiting: set[int] = set()

    def start(self) -> None:
        """One more app lifespan uses this dispatcher; a stopped pool is made anew. Lifespans are counted so that
        an inner one ending (an ASGI test harness entering the same app again) leaves the outer one running."""
        self.users += 1
        if self.stopped:
            self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="meshplan-job")
            self.stopped = False

    def enqueue(self, job_id: int, ahead: bool = False) -> None:
        self._waiting.add(job_id)
        self.pool.submit(self._run, job_id)

    def waiting(self) -> set[int] | None:
        return set(self._waiting)

    def _run(self, job_id: int) -> None:
        self._waiting.discard(job_id)
        try:
            run_job(self.db, job_id, self.cfg)
        except Exception:  # the database went away mid-job: the job stays running/queued and is recovered
            log.exception("job %s could not be run", job_id)

    def problem(self) -> str | None:
        return None

    def shutdown(self) -> None:
        self.users -= 1
        if self.users > 0:
            return
        self.stopped = True
        self.pool.shutdown(wait=False, cancel_futures=True)


SEND_TIMEOUT_S = 2.0


class CeleryDispatcher:
    """Service mode: a message per job on the Redis broker."""

    mode = "celery"

    def __init__(self, cfg: Settings, app: Any = None) -> None:
        """`app`: an existing Celery app (a worker sends with its own); default a new one for `cfg`."""
        from workers.celery_app import make_celery

        if app is None:
            app = make_celery(cfg)
            # The API only sends: bound every broker call so that a dead Redis answers 503 (or leaves the job to
            # the sweep) within seconds instead of blocking a request for 19 s [issue 16].
            app.conf.broker_connection_timeout = SEND_TIMEOUT_S
            app.conf.broker_connection_max_retries = 0
            app.conf.redis_socket_timeout = SEND_TIMEOUT_S
            app.conf.redis_socket_connect_timeout = SEND_TIMEOUT_S
            app.conf.broker_transport_options = {
                **app.conf.broker_transport_options,
                "socket_connect_timeout": SEND_TIMEOUT_S,
                "socket_timeout": SEND_TIMEOUT_S,
            }
        self.app = app
        self._healthy_at = -1e9

    def enqueue(self, job_id: int, ahead: bool = False) -> None:
        queue = names.TAKEOVER_QUEUE if ahead else names.DEFAULT_QUEUE
        try:
            # ignore_result: the API never reads a task result (the job row is the result), and subscribing to it
            # blocked on a broker that accepts but does not answer [celery Celery.send_task on_task_call].
            self.app.send_task(names.RUN_JOB, args=[job_id], retry=False, ignore_result=True, queue=queue)
        except Exception as exc:
            raise BrokerUnavailable(f"broker unreachable: {type(exc).__name__}: {exc}".splitlines()[0]) from exc

    def waiting(self) -> set[int] | None:
        """Job ids of the run_job messages in the queues' Redis lists (every priority step) and in the hash of
        messages reserved by workers but not acknowledged (`unacked`, restored to the queue if their worker dies)
        [kombu transport/redis.py: Channel._q_for_pri, unacked_key]. None when Redis does not answer."""
        try:
            with self.app.connection_for_read() as conn:
                channel: Any = conn.default_channel
                client = channel.client
                raw: list[bytes] = []
                for queue in names.QUEUES:
                    for pri in channel.priority_steps:
                        raw += client.lrange(channel._q_for_pri(queue, pri), 0, -1)
                held = [json.dumps(json.loads(v)[0]).encode() for v in client.hvals(channel.unacked_key)]
        except Exception:
            log.warning("the broker's queues could not be read", exc_info=True)
            return None
        return {i for i in (_job_of(m) for m in [*raw, *held]) if i is not None}

    def problem(self) -> str | None:
        """Asked before every submission: a healthy answer is reused for a second, a failure never is."""
        now = time.monotonic()
        if now - self._healthy_at < 1.0:
            return None
        try:
            with self.app.connection_for_write() as conn:
                conn.ensure_connection(max_retries=1, timeout=1)
                conn.default_channel.client.ping()
        except Exception as exc:
            return f"broker unreachable: {type(exc).__name__}"
        self._healthy_at = now
        return None

    def shutdown(self) -> None:
        pass


def _job_of(message: bytes) -> int | None:
    """The job id of a run_job message as kombu stores it in Redis (Celery protocol 2: the body, base64, is
    [args, kwargs, embed]); None for another task or a message it cannot read."""
    try:
        m = json.loads(message)
        if m["headers"].get("task") != names.RUN_JOB:
            return None
        body = m["body"]
        if m.get("properties", {}).get("body_encoding") == "base64":
            body = base64.b64decode(body)
        args = json.loads(body)[0]
        return int(args[0])
    except (ValueError, KeyError, IndexError, TypeError):
        return None


def make_dispatcher(db: Database, cfg: Settings) -> Dispatcher:
    return CeleryDispatcher(cfg) if cfg.redis_url else InProcessDispatcher(db, cfg)


def send_committed(dispatcher: Dispatcher, job_ids: list[int], ahead: bool = False) -> None:
    """Send jobs whose transaction has committed (`ahead`: before new work). A broker that fails now loses
    nothing: the jobs stay queued in the database and the sweep (beat, every sweep_interval_s) sends them again."""
    for job_id in job_ids:
        try:
            dispatcher.enqueue(job_id, ahead)
        except BrokerUnavailable:
            log.warning("job %s stays queued until the broker is back (the sweep sends it)", job_id)
