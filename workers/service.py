"""What the tasks and commands call: each opens its own transaction and enqueues after it commits."""

from __future__ import annotations

import logging

from optimizer.errors import DomainError
from service.calibration import recalibrate_stale
from service.jobs import run_job
from service.replan import check_watches
from service.scheduler_sync import SyncOutcome, note_sync_error, sync_cluster
from store.db import Database, database
from store.repositories.clusters import ClusterRepository
from store.repositories.jobs import JobRepository
from store.settings import Settings, settings
from workers.dispatch import CeleryDispatcher, Dispatcher, make_dispatcher, send_committed

log = logging.getLogger("meshplan.workers")


def run(job_id: int) -> str:
    return run_job(database(), job_id, settings())


def replan_all(
    trigger: str = "nightly",
    cluster_id: int | None = None,
    dispatcher: Dispatcher | None = None,
    db: Database | None = None,
    cfg: Settings | None = None,
) -> list[int]:
    """Check every watch (or a cluster's); submit and send a job for each whose inputs changed. `db` and `cfg`:
    the database and settings the caller checked (`meshplan replan --now`); default this process's (a task's)
    [issue 48 §3: the command checked one DATABASE_URL and re-planned the cached settings' one]."""
    db, cfg = db or database(), cfg or settings()
    if trigger == "nightly":  # the schedulers' inventories, then measurements since the last fit, come first
        # [issue 34: the nightly re-plan sees tonight's node states]
        sync_schedulers(cluster_id, replan=False, dispatcher=dispatcher, db=db, cfg=cfg)
        with db.session() as s:
            recalibrate_stale(s, cluster_id)  # [issue 14]
    with db.session() as s:
        checks = check_watches(s, trigger, cluster_id, cfg)
    jobs = [c.job_id for c in checks if c.job_id is not None]
    send_committed(dispatcher or _dispatcher(db, cfg), jobs)
    return jobs


def sweep(dispatcher: Dispatcher | None = None) -> list[int]:
    """Send again the jobs queued for sweep_after_s whose message is lost (a broker restart): one whose message
    the broker still holds, waiting behind others or reserved by a worker, is not sent twice [issue 47 item 2].
    When the broker cannot say, every such job is sent (claiming makes a second message harmless)."""
    return send_unsent(database(), dispatcher or _dispatcher(), settings().sweep_after_s)


def send_unsent(db: Database, dispatcher: Dispatcher, older_than_s: float = 0.0) -> list[int]:
    """Send the jobs queued for longer than `older_than_s` whose message the broker does not hold: the sweep's
    rule, and what an API process does as it starts (a process killed between a commit and its send left them;
    waiting for the sweep took 189 s) [issue 59 item 2]. A second message is harmless: a job is claimed once."""
    with db.session() as s:
        ids = not_held(dispatcher, JobRepository(s).stale_queued_ids(older_than_s))
    send_committed(dispatcher, ids)
    return ids


def not_held(dispatcher: Dispatcher, job_ids: list[int]) -> list[int]:
    """The jobs whose message the broker does not hold (all of them when it cannot tell: claiming makes a second
    message harmless)."""
    if not job_ids:
        return []
    waiting = dispatcher.waiting()
    return [i for i in job_ids if waiting is None or i not in waiting]


def take_over_expired(dispatcher: Dispatcher | None = None) -> list[int]:
    """Jobs whose worker stopped beating (killed whole, machine gone): requeued and sent at once, committed first,
    ahead of new work (the takeover queue). Called only once the database has been reachable for a full lease
    (workers/lease_watch.py)."""
    with database().session() as s:
        ids = JobRepository(s).requeue_expired()
    if ids:
        log.warning("jobs %s: their worker stopped beating; sent again", ids)
        send_committed(dispatcher or _dispatcher(), ids, ahead=True)
    return ids


def database_problem() -> str | None:
    """None when the database answers, else why not."""
    return database().ping()


def _dispatcher(db: Database | None = None, cfg: Settings | None = None) -> Dispatcher:
    """Where tasks send follow-up jobs: with REDIS_URL this process's Celery app, not a new one per call."""
    cfg = cfg or settings()
    if cfg.redis_url:
        from workers.celery_app import app

        return CeleryDispatcher(cfg, app)
    return make_dispatcher(db or database(cfg.database_url), cfg)


def sync_schedulers(
    cluster_id: int | None = None,
    replan: bool | None = None,
    dispatcher: Dispatcher | None = None,
    db: Database | None = None,
    cfg: Settings | None = None,
) -> list[SyncOutcome]:
    """Sync every cluster that has a sync source (or one), each in its own transaction: a scheduler that does not
    answer or answers nonsense is noted on its cluster and the others go on. Watch re-plan jobs (`replan`, default
    the replan_on_inventory_change setting) are sent after each commit. `db`, `cfg`: as replan_all's."""
    db, cfg = db or database(), cfg or settings()
    with db.session() as s:
        ids = [i for i in ClusterRepository(s).synced_ids() if cluster_id is None or i == cluster_id]
    outcomes: list[SyncOutcome] = []
    for cid in ids:
        try:
            with db.session() as s:
                outcome = sync_cluster(s, cid, None, cfg, replan)
        except DomainError as exc:
            with db.session() as s:
                note_sync_error(s, cid, exc)
            continue
        outcomes.append(outcome)
        if outcome.replan_jobs:
            send_committed(dispatcher or _dispatcher(db, cfg), outcome.replan_jobs)
    return outcomes
