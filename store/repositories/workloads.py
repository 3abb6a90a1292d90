"""Workloads, stored once per distinct document."""

from __future__ import annotations

from pydantic import TypeAdapter
from sqlalchemy import select

from optimizer.spec.inventory import content_hash
from optimizer.spec.workload import InferenceWorkload, TrainingWorkload
from optimizer.spec.workload import Workload as WorkloadSpec
from store.errors import ConflictError
from store.models import Workload
from store.repositories.base import Repository, insert_unique

_ADAPTER: TypeAdapter[TrainingWorkload | InferenceWorkload] = TypeAdapter(WorkloadSpec)


def workload_spec(row: Workload) -> TrainingWorkload | InferenceWorkload:
    return _ADAPTER.validate_python(row.spec)


def workload_hash(spec: TrainingWorkload | InferenceWorkload) -> str:
    """The key a workload document is stored under (`intern`)."""
    return content_hash(spec.model_dump(mode="json"))


class WorkloadRepository(Repository[Workload]):
    row_type, kind = Workload, "workload"

    def intern(self, spec: TrainingWorkload | InferenceWorkload) -> Workload:
        """The row of this workload document, created when new (concurrent callers get the same row)."""
        doc = spec.model_dump(mode="json")
        digest = content_hash(doc)
        row = self.s.scalar(select(Workload).where(Workload.content_hash == digest))
        if row is not None:
            return row
        try:
            return insert_unique(self.s, Workload(mode=spec.mode, spec=doc, content_hash=digest), "workload", "")
        except ConflictError:
            row = self.s.scalar(select(Workload).where(Workload.content_hash == digest))
            assert row is not None
            return row
