"""User-defined GPU types."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from optimizer.spec.gpu_catalog import BUILTIN_GPUS, GPUSpec
from store.errors import ConflictError, NotFoundError
from store.models import GpuType
from store.repositories.base import insert_unique


class GpuTypeRepository:
    def __init__(self, session: Session) -> None:
        self.s = session

    def create(self, spec: GPUSpec) -> GpuType:
        if spec.name.lower() in {n.lower() for n in BUILTIN_GPUS}:
            raise ConflictError("name", f"{spec.name!r} is a built-in GPU type")
        row = GpuType(name=spec.name, spec=spec.model_dump(mode="json"))
        return insert_unique(self.s, row, "name", f"a GPU type named {spec.name!r} exists")

    def list(self) -> list[GpuType]:
        return list(self.s.scalars(select(GpuType).order_by(GpuType.name)))

    def get(self, name: str) -> GpuType:
        row = self.s.scalar(select(GpuType).where(GpuType.name == name))
        if row is None:
            raise NotFoundError("gpu_type", name)
        return row

    def specs(self, names: set[str] | None = None) -> dict[str, GPUSpec]:
        """User-defined specs by name (only `names` when given)."""
        q = select(GpuType)
        if names is not None:
            q = q.where(GpuType.name.in_(names))
        return {r.name: GPUSpec.model_validate(r.spec) for r in self.s.scalars(q)}

    def delete(self, name: str) -> None:
        self.s.delete(self.get(name))
        self.s.flush()
