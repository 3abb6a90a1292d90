"""Sending jobs to be run: to Celery when REDIS_URL is set, else to a thread inside this process (embedded mode).
Callers enqueue only after the transaction that created the job committed."""

from __future__ import annotations

import base64
import json
import logging
import multiprocessing
import os
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
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


def _run_in_child(cfg: Settings, job_id: int) -> str:
    """A job in the embedded mode's child process: this process's own engine (store.db.database keys by PID)."""
    from store.db import database

    return run_job(database(cfg.database_url), job_id, cfg)


def _exit_with_parent(parent: int) -> None:
    """In the job child: exit as soon as the API process that spawned it is gone (killed whole), so no orphan keeps
    solving, or holds the terminal and pipes the API held; its job is taken over at the next start."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(0)

    threading.Thread(target=watch, name="meshplan-parent-watch", daemon=True).start()


def _warm_child() -> None:
    """Import what a solve needs before the first job arrives (the child is started with the API)."""
    import optimizer.search.planner  # noqa: F401


def _shared_across_processes(url: str) -> bool:
    """Whether another process opening `url` sees the same database (an in-memory SQLite database it does not)."""
    return not (url.startswith("sqlite") and (":memory:" in url or url.rstrip("/") in ("sqlite:", "sqlite+pysqlite:")))


class InProcessDispatcher:
    """Embedded mode (no REDIS_URL): jobs run one at a time through the same service code as a worker, in a child
    process of the API (settings.embedded_jobs "process", the default), so a solve never holds the API's
    interpreter: under the GIL a solving thread starved the API (50 clients on the plan history: p99 293 ms while
    two jobs solved, 10 ms after; issue 49). The child is spawned (not forked: the API holds threads and
    connections) when the app starts and kept; it renews each job's lease as a worker does. A child killed mid-job
    is taken over as a dead worker's is: the pool is made anew, and this process's lease watch requeues and sends
    the job once its lease has expired (store.repositories.jobs LEASE_S + TAKEOVER_CHECK_S). With "thread" (or an
    in-memory SQLite database, which a child cannot open) jobs run on a thread of this process."""

    mode = "in-process"

    def __init__(self, db: Database, cfg: Settings) -> None:
        self.db, self.cfg = db, cfg
        self.processes = cfg.embedded_jobs == "process" and _shared_across_processes(db.url)
        self.pool: Executor = self._new_pool()
        self.stopped = False
        self.users = 0
        self._lock = threading.Lock()
        self._futures: dict[int, Future[str]] = {}  # sent, not finished
        self._watch_stop = threading.Event()

    def _new_pool(self) -> Executor:
        if not self.processes:
            return ThreadPoolExecutor(max_workers=1, thread_name_prefix="meshplan-job")
        return ProcessPoolExecutor(
            max_workers=1,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_exit_with_parent,
            initargs=(os.getpid(),),
        )

    def start(self) -> None:
        """One more app lifespan uses this dispatcher; a stopped pool is made anew. Lifespans are counted so that
        an inner one ending (an ASGI test harness entering the same app again) leaves the outer one running."""
        with self._lock:
            self.users += 1
            if self.stopped:
                self.pool = self._new_pool()
                self.stopped = False
        if self.processes and self.users == 1:
            self.pool.submit(_warm_child)
            self._watch_stop.clear()
            threading.Thread(target=self._lease_watch, name="meshplan-lease-watch", daemon=True).start()

    def enqueue(self, job_id: int, ahead: bool = False) -> None:
        """Run the job after those sent before (`ahead`, a job taken over, changes nothing: one queue, one child)."""
        call: tuple[Callable[..., str], tuple[object, ...]] = (
            (_run_in_child, (self.cfg, job_id)) if self.processes else (run_job, (self.db, job_id, self.cfg))
        )
        with self._lock:
            try:
                future = self.pool.submit(call[0], *call[1])
            except BrokenProcessPool:  # the child died (killed): a new one runs this and later jobs
                self.pool = self._new_pool()
                future = self.pool.submit(call[0], *call[1])
            self._futures[job_id] = future
        future.add_done_callback(lambda f: self._done(job_id, f))

    def waiting(self) -> set[int] | None:
        """The jobs sent and not yet started (the sweep sends none of them again)."""
        with self._lock:
            return {job_id for job_id, f in self._futures.items() if not f.running() and not f.done()}

    def _done(self, job_id: int, future: Future[str]) -> None:
        with self._lock:
            if self._futures.get(job_id) is future:
                del self._futures[job_id]
        exc = None if future.cancelled() else future.exception()
        if isinstance(exc, BrokenProcessPool):  # killed with its process: the lease watch takes the job over
            log.warning("job %s: its process died; taken over when its lease expires", job_id)
        elif exc is not None:  # the database went away mid-job: the job stays running/queued and is recovered
            log.error("job %s could not be run: %s", job_id, exc)

    def _lease_watch(self) -> None:
        """Jobs whose process stopped beating are requeued (one conditional update each) and sent again, once the
        database has answered for a full lease (a database outage stops heartbeats too: it is no death; as
        workers/lease_watch.py does for the workers)."""
        from store.repositories.jobs import LEASE_S, TAKEOVER_CHECK_S, JobRepository

        reachable_since: float | None = None
        while not self._watch_stop.wait(TAKEOVER_CHECK_S):
            if self.db.ping() is not None:
                reachable_since = None
                continue
            reachable_since = reachable_since if reachable_since is not None else time.monotonic()
            if time.monotonic() - reachable_since < LEASE_S:
                continue
            try:
                with self.db.session() as s:
                    ids = JobRepository(s).requeue_expired()
                for job_id in ids:
                    log.warning("job %s: its process stopped beating; sent again", job_id)
                    self.enqueue(job_id, ahead=True)
            except Exception:  # the database briefly away: look again at the next tick
                log.warning("expired job leases not checked", exc_info=True)

    def problem(self) -> str | None:
        return None

    def wait(self) -> None:
        """Wait for the jobs sent so far (a command that sends jobs and waits for them)."""
        self.pool.shutdown(wait=True)

    def shutdown(self) -> None:
        with self._lock:
            self.users -= 1
            if self.users > 0:
                return
            self.stopped = True
            self._watch_stop.set()
            pool = self.pool
        # Outside the lock: cancelling the queued jobs runs their done-callbacks (`_done`) here, which take the lock.
        pool.shutdown(wait=False, cancel_futures=True)
        # A job still solving in the child stops with the API; the next start recovers it
        # (service.jobs.recover_interrupted), as it did the thread's. (ProcessPoolExecutor has no public way to
        # stop its workers before Python 3.14's terminate_workers.)
        children: dict[int, multiprocessing.process.BaseProcess] = getattr(pool, "_processes", None) or {}
        for child in list(children.values()):
            if child.is_alive():
                child.terminate()


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
        self._asking = threading.Lock()
        self._answered_at = -1e9
        self._answer: str | None = None

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
        """Asked before every submission: a healthy answer is reused for a second, a failure never is. One
        request at a time asks the broker; those that arrived while it asked take its answer, a failure included
        (answered after they arrived). Every request whose healthy answer had expired asked at once, each on a new
        connection: 16 in flight at each second's turn under load [issue 49]."""
        arrived = time.monotonic()
        if arrived - self._healthy_at < 1.0:
            return None
        with self._asking:
            if self._answered_at >= arrived:  # answered while this request waited
                return self._answer
            asked = time.monotonic()
            self._answer = self._ask()
            self._answered_at = time.monotonic()
            if self._answer is None:
                self._healthy_at = asked
            return self._answer

    def _ask(self) -> str | None:
        try:
            with self.app.connection_for_write() as conn:
                conn.ensure_connection(max_retries=1, timeout=1)
                conn.default_channel.client.ping()
        except Exception as exc:
            return f"broker unreachable: {type(exc).__name__}"
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


class CommittedSender:
    """Sends committed jobs from a thread of this process, in commit order, so that a request answers as soon as its
    transaction has committed: the broker's round trip (and a broker that hangs, up to SEND_TIMEOUT_S) is no part
    of a submission's answer [issue 49: what a submission must do before it answers, and nothing more]. Nothing is
    lost by it: a job is in the database before it is queued here, and one whose send fails, or whose process dies
    before sending it, stays queued until beat's sweep sends it (README, Delivery guarantee)."""

    def __init__(self, dispatcher: Dispatcher) -> None:
        self.dispatcher = dispatcher
        self._queue: queue.SimpleQueue[int | None] = queue.SimpleQueue()
        self._pending = 0
        self._idle = threading.Condition()
        self._thread: threading.Thread | None = None

    def send(self, job_ids: list[int]) -> None:
        """Queue jobs whose transaction has committed; returns at once."""
        if not job_ids:
            return
        with self._idle:
            self._pending += len(job_ids)
            if self._thread is None:  # started by the first send: after any fork, in the process that sends
                self._thread = threading.Thread(target=self._run, name="meshplan-sender", daemon=True)
                self._thread.start()
        for job_id in job_ids:
            self._queue.put(job_id)

    def _run(self) -> None:
        while (job_id := self._queue.get()) is not None:
            try:
                send_committed(self.dispatcher, [job_id])
            except Exception:  # never let the thread die: the job stays queued and the sweep sends it
                log.exception("job %s not sent (the sweep sends it)", job_id)
            finally:
                with self._idle:
                    self._pending -= 1
                    self._idle.notify_all()

    def flush(self, timeout_s: float) -> bool:
        """Wait until every job queued so far has been sent (or failed to be); False on the timeout."""
        with self._idle:
            return self._idle.wait_for(lambda: self._pending == 0, timeout_s)

    def close(self, timeout_s: float = 2 * SEND_TIMEOUT_S) -> None:
        """Send what is queued (for at most `timeout_s`), then stop the thread."""
        if self._thread is None:
            return
        self.flush(timeout_s)
        self._queue.put(None)
        self._thread.join(timeout_s)
        self._thread = None
