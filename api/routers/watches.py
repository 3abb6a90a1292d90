"""/v1/watches: what to re-plan every night; replan now."""

from __future__ import annotations

from fastapi import APIRouter

from api.convert import job_out, watch_out
from api.deps import DispatcherDep, RowId, SessionDep, SettingsDep, Writer, send_after_commit
from api.responses import NOT_FOUND, STANDARD, WRITE
from api.routers.rows import add_list_get_delete
from api.schemas import ReplanOut, WatchCreate, WatchOut
from service.replan import check_watch
from service.watches import create_watch
from store.repositories.jobs import JobRepository
from store.repositories.watches import WatchRepository
from workers.dispatch import BrokerUnavailable

router = APIRouter(prefix="/v1/watches", tags=["watches"], responses=STANDARD)


@router.post("", status_code=201, response_model=WatchOut, responses=WRITE)
def create(body: WatchCreate, s: SessionDep, cfg: SettingsDep, _: Writer) -> WatchOut:
    w = create_watch(
        s,
        body.name,
        body.cluster_id,
        body.model_id,
        body.workload,
        body.search,
        body.time_limit_s,
        cfg,
        switch_threshold_pct=body.switch_threshold_pct,
    )
    return watch_out(s, w)


add_list_get_delete(router, WatchRepository, watch_out, WatchOut, "watches", "watch_id")


@router.post("/{watch_id}/replan", status_code=202, response_model=ReplanOut, responses=NOT_FOUND)
def replan(watch_id: RowId, s: SessionDep, d: DispatcherDep, cfg: SettingsDep, _: Writer) -> ReplanOut:
    """Plan this watch now, warm-started from its last plan, whether or not its inputs changed."""
    problem = d.problem()
    if problem:
        raise BrokerUnavailable(problem)
    check = check_watch(s, WatchRepository(s).get(watch_id), "user", cfg, force=True)
    job = JobRepository(s).get(check.job_id) if check.job_id else None
    if job is not None:
        send_after_commit(s, [job.id])
    return ReplanOut(watch_id=watch_id, changed=check.changed, job=job_out(s, job) if job else None)
