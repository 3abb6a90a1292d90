"""/v1/jobs: submit (202, idempotent), follow, cancel."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Header, Query

from api.convert import job_out, jobs_out, page_out
from api.deps import DispatcherDep, Paging, Reader, RowId, SessionDep, SettingsDep, Writer, send_after_commit
from api.responses import CONFLICT, NOT_FOUND, STANDARD, WRITE
from api.schemas import JobCreate, JobOut, PageOut
from optimizer.errors import DomainError
from service.jobs import cancel, submit
from store.models import MAX_ID
from store.repositories.jobs import JobRepository
from workers.dispatch import BrokerUnavailable, Dispatcher
from workers.service import not_held

router = APIRouter(prefix="/v1/jobs", tags=["jobs"], responses=STANDARD)
JobState = Literal["queued", "running", "succeeded", "failed", "cancelled"]


@router.post("", status_code=202, response_model=JobOut, responses=WRITE)
def submit_job(
    body: JobCreate,
    s: SessionDep,
    d: DispatcherDep,
    cfg: SettingsDep,
    caller: Writer,
    idempotency_key: Annotated[str | None, Header(max_length=128, pattern=r"^[\x21-\x7e]+$")] = None,
) -> JobOut:
    """Queue a planning job. The same Idempotency-Key with the same body answers the same job; with another body,
    409."""
    problem = d.problem()
    if problem:
        raise BrokerUnavailable(problem)
    if body.time_limit_s is not None and body.time_limit_s > cfg.max_time_limit_s:
        raise DomainError("time_limit_s", f"must be at most {cfg.max_time_limit_s} seconds (got {body.time_limit_s})")
    job, created = submit(s, body, client=caller.name, idempotency_key=idempotency_key, cfg=cfg)
    if created or _unsent(job.id, job.status, d):
        send_after_commit(s, [job.id])
    return job_out(s, job)


def _unsent(job_id: int, status: str, d: Dispatcher) -> bool:
    """An idempotent retry of a job still queued whose message the broker does not hold: the first request's
    process may have died between its commit and its send, so the retry sends it [issue 59 item 2]."""
    return status == "queued" and bool(not_held(d, [job_id]))


@router.get("", response_model=PageOut[JobOut])
def list_jobs(
    s: SessionDep,
    _: Reader,
    page: Paging,
    status: JobState | None = None,
    cluster_id: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
) -> PageOut[JobOut]:
    p = JobRepository(s).page(page, status=status, cluster_id=cluster_id)
    return page_out(p, jobs_out(s, p.items))


@router.get("/{job_id}", response_model=JobOut, responses=NOT_FOUND)
def get(job_id: RowId, s: SessionDep, _: Reader) -> JobOut:
    return job_out(s, JobRepository(s).get(job_id))


@router.delete("/{job_id}", response_model=JobOut, responses=CONFLICT)
def cancel_job(job_id: RowId, s: SessionDep, _: Writer) -> JobOut:
    """Cancel a queued job at once, or stop a running job's solver (within a second)."""
    return job_out(s, cancel(s, job_id))
