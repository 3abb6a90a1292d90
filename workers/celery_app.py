"""The Celery app: Redis broker and result backend from REDIS_URL, settings that make delivery safe."""

from __future__ import annotations

from typing import Any

from celery import Celery
from celery.schedules import crontab
from celery.signals import worker_process_init
from kombu.entity import Queue

from store.settings import Settings, settings
from workers import names


def make_celery(cfg: Settings) -> Celery:
    url = cfg.redis_url or "redis://127.0.0.1:6379/0"
    app = Celery("meshplan", broker=url, backend=url, include=["workers.tasks", "workers.lease_watch"])
    hh, mm = (int(x) for x in cfg.replan_at.split(":"))
    app.conf.update(
        task_acks_late=True,  # acknowledge after the task ran: a worker that dies leaves the message unacked
        task_reject_on_worker_lost=True,  # ... and a killed child process puts it back on the queue
        worker_prefetch_multiplier=1,  # one job at a time per process; nothing waits behind a long solve
        task_soft_time_limit=cfg.max_time_limit_s + 60,  # above the solver's own limit
        task_time_limit=cfg.max_time_limit_s + 120,
        broker_transport_options={
            "visibility_timeout": cfg.visibility_timeout_s,
            # kombu sweeps unacked messages every interval x throttle seconds (10 x 10 by default): a dead
            # worker's job came back ~100 s after its visibility timeout. Every sweep scans, every 5 s or less
            # [kombu/transport/redis.py unacked_restore_interval, unacked_restore_throttle].
            "unacked_restore_interval": max(1, min(5, round(cfg.visibility_timeout_s / 3))),
            "unacked_restore_throttle": 1,
            # The sweep holds a Redis mutex that expires after 300 s by default: a worker killed while sweeping
            # (it sweeps every few seconds) blocked every other worker's sweep, and so the dead worker's job, for
            # 5 minutes [kombu/transport/redis.py unacked_mutex_expire; seen as a 120 s wait_job time-out in
            # tests/workers/test_worker_process.py]. A sweep takes milliseconds; 10 s is ample.
            "unacked_mutex_expire": 10,
            "queue_order_strategy": "priority",
        },
        # Taken-over jobs first: every worker consumes both queues, and the Redis transport polls them in this
        # order (BRPOP over the keys in order; "priority" keeps the order fixed instead of rotating it) [kombu
        # transport/redis.py queue_order_strategy, _brpop_start].
        task_queues=[Queue(q) for q in names.QUEUES],  # type: ignore[no-untyped-call]
        task_default_queue=names.DEFAULT_QUEUE,
        result_expires=24 * 3600,
        task_serializer="json",
        accept_content=["json"],
        timezone=cfg.replan_timezone,
        enable_utc=True,
        broker_connection_retry_on_startup=True,
        beat_schedule=beat_schedule(cfg, hh, mm),
    )
    return app


def beat_schedule(cfg: Settings, hh: int, mm: int) -> dict[str, dict[str, Any]]:
    """What beat runs: the nightly re-plan (which syncs the schedulers' inventories first), the sweep of lost
    jobs, and, with MESHPLAN_SYNC_INTERVAL_S, the inventory syncs in between."""
    schedule: dict[str, dict[str, Any]] = {
        "nightly-replan": {"task": names.REPLAN, "schedule": crontab(hour=hh, minute=mm)},
        "sweep-lost-jobs": {"task": names.SWEEP, "schedule": cfg.sweep_interval_s},
    }
    if cfg.sync_interval_s > 0:
        schedule["sync-inventories"] = {"task": names.SYNC, "schedule": cfg.sync_interval_s}
    return schedule


app = make_celery(settings())


@worker_process_init.connect  # type: ignore[untyped-decorator]
def _fresh_engine(**_: Any) -> None:
    """A database engine per worker process, created after the fork (store.db keys engines by PID)."""
    from store.db import database

    database()
