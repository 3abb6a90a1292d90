"""Model specs and their immutable versions."""

from __future__ import annotations

from sqlalchemy import select

from optimizer.spec.inventory import content_hash, spec_document
from optimizer.spec.model_spec import ModelSpec
from store.errors import NotFoundError
from store.models import Model, ModelVersion
from store.repositories.base import Repository, get_row, insert_unique, numbers_by_id
from store.repositories.paging import Page, PageRequest, paginate
from store.repositories.spec_cache import SpecCache


def version_spec(model: Model, version: ModelVersion) -> ModelSpec:
    """The spec of a version, named after its model."""
    return ModelSpec.model_validate({**version.spec, "name": model.name})


_VERSIONS = SpecCache[ModelSpec](budget=256, weight=lambda _m: 1, entries=256)


def cached_version_spec(model: Model, version: ModelVersion) -> ModelSpec:
    """`version_spec`, parsed once per process (store/repositories/spec_cache.py); a ModelSpec is frozen."""
    return _VERSIONS.get((version.id, model.name), lambda: version_spec(model, version))


class ModelRepository(Repository[Model]):
    row_type, kind = Model, "model"

    def create(self, name: str) -> Model:
        return insert_unique(self.s, Model(name=name, head_version=0), "name", f"a model named {name!r} exists")

    def by_name(self, name: str) -> Model | None:
        return self.s.scalar(select(Model).where(Model.name == name))

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
        return get_row(self.s, ModelVersion, version_id, "version")

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
