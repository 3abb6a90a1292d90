"""A cluster's acceptance tests (nccl-tests, GEMM sweeps) [issue 33]."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func, select

from store.models import AcceptanceTest
from store.repositories.base import Repository

# A cluster's tests read at once (the newest): far more than a team runs per pool and collective.
MAX_TESTS = 1_000


class AcceptanceTestRepository(Repository[AcceptanceTest]):
    row_type, kind = AcceptanceTest, "acceptance test"

    def newest_by_cluster(self, cluster_id: int | None = None) -> list[tuple[int, datetime]]:
        """(cluster id, time of its newest acceptance test) for every cluster with tests (or one)."""
        q = select(AcceptanceTest.cluster_id, func.max(AcceptanceTest.created_at)).group_by(AcceptanceTest.cluster_id)
        if cluster_id is not None:
            q = q.where(AcceptanceTest.cluster_id == cluster_id)
        return [(cid, newest) for cid, newest in self.s.execute(q).all()]

    def of_cluster(self, cluster_id: int, limit: int = MAX_TESTS) -> list[AcceptanceTest]:
        """The cluster's tests, newest first (ties: the higher id first)."""
        q = (
            select(AcceptanceTest)
            .where(AcceptanceTest.cluster_id == cluster_id)
            .order_by(AcceptanceTest.created_at.desc(), AcceptanceTest.id.desc())
            .limit(limit)
        )
        return list(self.s.scalars(q))
