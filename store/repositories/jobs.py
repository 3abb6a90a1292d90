"""Planning jobs: idempotent submission, claiming, progress, completion."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import and_, case, func, select, update
from sqlalchemy.exc import IntegrityError

from store.errors import ConflictError
from store.models import Job, now
from store.repositories.base import Repository
from store.repositories.paging import Page, PageRequest

ACTIVE = ("queued", "running")
FINISHED = ("succeeded", "failed", "cancelled")
LEASE_S = 10.0  # a running job whose worker has not beaten for this long is claimable again
# How often every live worker looks for expired leases (a worker killed whole: no Celery parent to requeue its
# message, the broker keeps it unacknowledged for the visibility timeout): a dead worker's job is taken over at most
# LEASE_S + TAKEOVER_CHECK_S after its last heartbeat [issue 37 item 1].
TAKEOVER_CHECK_S = 2.0


class JobRepository(Repository[Job]):
    row_type, kind = Job, "job"

    def by_key(self, client: str, key: str) -> Job | None:
        return self.s.scalar(select(Job).where(Job.client == client, Job.idempotency_key == key))

    def submit(self, job: Job) -> tuple[Job, bool]:
        """Insert `job`, or, when its client already used its idempotency key, return that job: (job, created).
        The same key with another request body is a conflict. Two racing writers create one job: the unique
        (client, idempotency_key) constraint decides, the loser reads the winner's row."""
        if not job.idempotency_key:  # nothing unique to race on: no savepoint (two round trips) needed
            self.s.add(job)
            self.s.flush()
            return job, True
        existing = self.by_key(job.client, job.idempotency_key)
        if existing is not None:
            return self._same(existing, job), False
        try:
            with self.s.begin_nested():
                self.s.add(job)
                self.s.flush()
        except IntegrityError:
            existing = self.by_key(job.client, job.idempotency_key)
            if existing is None:
                raise
            return self._same(existing, job), False
        return job, True

    @staticmethod
    def _same(existing: Job, job: Job) -> Job:
        if existing.request_hash != job.request_hash:
            raise ConflictError(
                "Idempotency-Key", f"key {job.idempotency_key!r} was used for job {existing.id} with another body"
            )
        return existing

    def page(self, page: PageRequest, status: str | None = None, cluster_id: int | None = None) -> Page[Job]:
        return self.newest(page, status=status or None, cluster_id=cluster_id or None)

    def queued_ids(self) -> list[int]:
        return list(self.s.scalars(select(Job.id).where(Job.status == "queued").order_by(Job.id)))

    def counts_by_status(self) -> dict[str, int]:
        return {status: n for status, n in self.s.execute(select(Job.status, func.count()).group_by(Job.status))}

    def solve_time_histogram(self, buckets: tuple[float, ...]) -> tuple[int, float, list[int]]:
        """Succeeded jobs: (count, total solve seconds, cumulative count at or below each bucket)."""
        cols = [func.sum(case((Job.elapsed_s <= b, 1), else_=0)) for b in buckets]
        row = self.s.execute(
            select(func.count(), func.coalesce(func.sum(Job.elapsed_s), 0.0), *cols).where(
                Job.status == "succeeded", Job.elapsed_s.is_not(None)
            )
        ).one()
        return int(row[0]), float(row[1]), [int(v or 0) for v in row[2:]]

    def running_ids(self) -> list[int]:
        return list(self.s.scalars(select(Job.id).where(Job.status == "running").order_by(Job.id)))

    def claim(self, job_id: int) -> bool:
        """Mark the job running if it is queued. A running job is never claimed here, even one whose lease expired:
        its heartbeats may have stopped only because the database was away, and its worker may be about to store
        its plan. Taking a job over is the lease watch's alone (`requeue_expired`, once the database has been
        reachable for a full lease), which puts it back to queued and sends it [issue 47 item 2]. A finished or
        cancelled job is not claimed: never solved twice."""
        res = self.s.execute(
            update(Job)
            .where(Job.id == job_id, Job.cancel_requested.is_(False), Job.status == "queued")
            .values(status="running", started_at=now(), heartbeat_at=now(), attempts=Job.attempts + 1, error=None)
        )
        return bool(res.rowcount)  # type: ignore[attr-defined]

    def heartbeat(self, job_id: int) -> None:
        self.s.execute(update(Job).where(Job.id == job_id, Job.status == "running").values(heartbeat_at=now()))

    def requeue_running(self) -> list[int]:
        """Embedded mode at start-up: nothing else runs jobs, so every running job was interrupted."""
        ids = self.running_ids()
        if ids:
            self.s.execute(update(Job).where(Job.id.in_(ids)).values(status="queued", heartbeat_at=None))
        return ids

    def stale_queued_ids(self, older_than_s: float) -> list[int]:
        """Jobs queued for longer than `older_than_s`: their message may be lost (a broker restart), the sweep sends
        them again unless the broker still holds it. Running jobs whose lease expired are the lease watch's."""
        t = now()
        q = select(Job.id).where(Job.status == "queued", Job.created_at < t - timedelta(seconds=older_than_s))
        return list(self.s.scalars(q.order_by(Job.id)))

    def requeue_expired(self) -> list[int]:
        """Running jobs whose lease expired (their worker died) put back to queued, each by one conditional update:
        of several workers looking at once, one takes each job over (and sends it); the others see it queued."""
        stale = now() - timedelta(seconds=LEASE_S)
        expired = and_(Job.status == "running", Job.heartbeat_at < stale)
        taken: list[int] = []
        for job_id in self.s.scalars(select(Job.id).where(expired).order_by(Job.id)):
            res = self.s.execute(
                update(Job).where(Job.id == job_id, expired).values(status="queued", heartbeat_at=None)
            )
            if res.rowcount:  # type: ignore[attr-defined]
                taken.append(job_id)
        return taken

    def progress(self, job_id: int, best: float | None, bound: float | None, elapsed: float, solved: int) -> None:
        self.s.execute(
            update(Job)
            .where(Job.id == job_id, Job.status == "running")
            .values(best_objective=best, bound=bound, elapsed_s=elapsed, candidates_solved=solved, progress_at=now())
        )

    def cancel_requested(self, job_id: int) -> bool:
        """Whether the job's solver must stop: cancel was asked, the job is gone (deleted with its cluster or its
        model, whose rows cascade to their jobs), or it is finished (another delivery stored its plan first: this
        solve would store nothing)."""
        row = self.s.execute(select(Job.cancel_requested, Job.status).where(Job.id == job_id)).one_or_none()
        return row is None or bool(row[0]) or row[1] in FINISHED

    def request_cancel(self, job_id: int) -> Job:
        """Cancel a queued job at once; a running one is flagged and its solver stops within a second."""
        job = self.get(job_id)
        if job.status in FINISHED:
            raise ConflictError("status", f"job {job_id} is {job.status}; only queued or running jobs can be cancelled")
        job.cancel_requested = True
        if job.status == "queued":
            job.status, job.finished_at = "cancelled", now()
        self.s.flush()
        return job

    def finish(self, job: Job, status: str, error: str | None = None, at: datetime | None = None) -> None:
        job.status = status
        job.error = error
        job.finished_at = at or now()
        self.s.flush()
