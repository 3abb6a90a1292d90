"""Model specs and their immutable versions."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from optimizer.spec.inventory import content_hash, spec_document
from optimizer.spec.model_spec import ModelSpec
from store.errors import NotFoundError
from store.models import Model, ModelVersion
from store.repositories.base import insert_unique, numbers_by_id
from store.repositories.paging import Page, PageRequest, paginate


def version_spec(model: Model, version: ModelVersion) -> ModelSpec:
    """The spec of a version, named after its model."""
    return ModelSpec.model_validate({**version.spec, "name": model.name})


class ModelRepository:
    def __init__(self, session: Session) -> None:
        self.s = session

    def create(self, name: str) -> Model:
        return insert_unique(self.s, Model(name=name, head_version=0), "name", f"a model named {name!r} exists")

    def get(self, model_id: int, *, for_update: bool = False) -> Model:
        q = select(Model).where(Model.id == model_id)
        if for_update:
            q = q.with_for_update()
        row = self.s.scalar(q)
        if row is None:
            raise NotFoundError("model", model_id)
        return row

    def by_name(self, name: str) -> Model | None:
        return self.s.scalar(select(Model).where(Model.name == name))

    def page(self, page: PageRequest) -> Page[Model]:
        return paginate(self.s, select(Model).order_by(Model.created_at.desc(), Model.id.desc()), page)

    def delete(self, model_id: int) -> None:
        self.s.delete(self.get(model_id))
        self.s.flush()

    def head(self, model: Model) -> ModelVersion | None:
        return self.version(model, model.head_version) if model.head_version else None

    def version(self, model: Model, number: int) -> ModelVersion:
        row = self.s.scalar(
            select(ModelVersion).where(ModelVersion.model_id == model.id, ModelVersion.number == number)
        )
        if row is None:
            raise NotFoundError("version", number)
        return row

    def version_by_id(self, version_id: int) -> ModelVersion:
        row = self.s.get(ModelVersion, version_id)
        if row is None:
            raise NotFoundError("version", version_id)
        return row

    def numbers(self, version_ids: set[int]) -> dict[int, int]:
        """Version number by version id: from this session when it holds the row, else one query."""
        return numbers_by_id(self.s, ModelVersion, version_ids)

    def versions(self, model: Model, page: PageRequest) -> Page[ModelVersion]:
        q = select(ModelVersion).where(ModelVersion.model_id == model.id)
        return paginate(self.s, q.order_by(ModelVersion.number.desc()), page)

    def record(self, model_id: int, spec: ModelSpec) -> tuple[ModelVersion, bool]:
        """A new version unless `spec` equals the current one (then (head, False))."""
        model = self.get(model_id, for_update=True)
        self.s.refresh(model)
        doc = spec_document(spec)
        digest = content_hash(doc)
        head = self.head(model)
        if head is not None and head.content_hash == digest:
            return head, False
        version = ModelVersion(
            model_id=model.id,
            number=model.head_version + 1,
            spec=doc,
            content_hash=digest,
            parameters=spec.num_parameters,
            num_layers=spec.num_layers,
            is_moe=spec.moe is not None,
        )
        self.s.add(version)
        model.head_version = version.number
        self.s.flush()
        return version, True
