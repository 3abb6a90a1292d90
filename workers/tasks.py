"""Thin tasks: ids in, one service call, nothing else."""

from __future__ import annotations

from typing import Any

from sqlalchemy.exc import OperationalError

from store.repositories.jobs import LEASE_S
from workers import names
from workers.celery_app import app
from workers.service import replan_all, run, sweep, sync_schedulers


# The database unreachable (OperationalError): retried with backoff up to a minute apart, never acknowledged as
# done; the job row, still queued or running without a live lease, is claimed by the retry [issue 16].
@app.task(  # type: ignore[untyped-decorator]
    bind=True,
    name=names.RUN_JOB,
    max_retries=None,
    autoretry_for=(OperationalError,),
    retry_backoff=2,
    retry_backoff_max=60,
    retry_jitter=True,
)
def run_job(self: Any, job_id: int) -> str:
    status = run(job_id)
    if status == "running":  # another delivery holds a live lease: look again once it would have expired
        raise self.retry(countdown=LEASE_S)
    return status


@app.task(name=names.REPLAN)  # type: ignore[untyped-decorator]
def replan(trigger: str = "nightly", cluster_id: int | None = None) -> list[int]:
    return replan_all(trigger, cluster_id)


@app.task(name=names.SWEEP)  # type: ignore[untyped-decorator]
def sweep_lost() -> list[int]:
    return sweep()


@app.task(name=names.SYNC)  # type: ignore[untyped-decorator]
def sync_inventories(cluster_id: int | None = None) -> list[str]:
    return [o.summary for o in sync_schedulers(cluster_id)]
