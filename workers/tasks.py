"""Thin tasks: ids in, one service call, nothing else."""

from __future__ import annotations

from workers import names
from workers.celery_app import app
from workers.service import replan_all, run, sweep


@app.task(name=names.RUN_JOB)  # type: ignore[untyped-decorator]
def run_job(job_id: int) -> str:
    return run(job_id)


@app.task(name=names.REPLAN)  # type: ignore[untyped-decorator]
def replan(trigger: str = "nightly", cluster_id: int | None = None) -> list[int]:
    return replan_all(trigger, cluster_id)


@app.task(name=names.SWEEP)  # type: ignore[untyped-decorator]
def sweep_lost() -> list[int]:
    return sweep()
