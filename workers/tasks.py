"""Thin tasks: ids in, one service call, nothing else."""

from __future__ import annotations

from sqlalchemy.exc import OperationalError

from workers import names
from workers.celery_app import app
from workers.service import replan_all, run, sweep, sync_schedulers


# The database unreachable (OperationalError): retried with backoff up to a minute apart, never acknowledged as
# done; the job row, still queued or running without a live lease, is claimed by the retry [issue 16].
@app.task(  # type: ignore[untyped-decorator]
    name=names.RUN_JOB,
    max_retries=None,
    autoretry_for=(OperationalError,),
    retry_backoff=2,
    retry_backoff_max=60,
    retry_jitter=True,
)
def run_job(job_id: int) -> str:
    # "running": another delivery holds the job; if its worker dies, the lease watch takes the job over and sends
    # it again (workers/lease_watch.py): this message is done [issue 47 item 2].
    return run(job_id)


@app.task(name=names.REPLAN)  # type: ignore[untyped-decorator]
def replan(trigger: str = "nightly", cluster_id: int | None = None) -> list[int]:
    return replan_all(trigger, cluster_id)


@app.task(name=names.SWEEP)  # type: ignore[untyped-decorator]
def sweep_lost() -> list[int]:
    return sweep()


@app.task(name=names.SYNC)  # type: ignore[untyped-decorator]
def sync_inventories(cluster_id: int | None = None) -> list[str]:
    return [o.summary for o in sync_schedulers(cluster_id)]
