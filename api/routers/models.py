"""/v1/models: specs from meshplan fields or a HuggingFace config.json, versioned."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body

from api.convert import model_out, page_out, version_out
from api.deps import NameQuery, Paging, Reader, RowId, SessionDep, Writer
from api.responses import NOT_FOUND, STANDARD, WRITE
from api.routers.rows import add_list_get_delete
from api.schemas import ModelCreate, ModelOut, ModelVersionCreate, PageOut, VersionOut, VersionResult
from optimizer.errors import DomainError
from optimizer.spec.model_loading import load_model_preset, model_from_hf_config
from optimizer.spec.model_spec import ModelSpec
from optimizer.spec.yaml_documents import yaml_mapping
from service.catalog import create_model, model_from_document
from store.repositories.models import ModelRepository

router = APIRouter(prefix="/v1/models", tags=["models"], responses=STANDARD)
HF_FILE = "config.json"
ModelYaml = Annotated[str, Body(media_type="application/yaml", description="ModelSpec fields (model.yaml).")]


def _spec(name: str, spec: dict[str, Any] | None, hf: dict[str, Any] | None, preset: str | None = None) -> ModelSpec:
    if preset is not None:  # a shipped preset by name [issue 48 §10]
        try:
            return load_model_preset(preset).model_copy(update={"name": name})
        except DomainError as exc:
            raise DomainError("preset", exc.rule) from exc
    if hf is not None:
        try:
            return model_from_hf_config(hf, name=name)
        except DomainError as exc:  # the loader names the file; here its body is the field hf_config
            if not exc.field.startswith(HF_FILE):
                raise
            raise DomainError("hf_config" + exc.field.removeprefix(HF_FILE), exc.rule) from exc
    assert spec is not None
    return model_from_document(name, spec)


@router.post("", status_code=201, response_model=ModelOut, responses=WRITE)
def create(body: ModelCreate, s: SessionDep, _: Writer) -> ModelOut:
    model, _v = create_model(s, body.name, _spec(body.name, body.spec, body.hf_config, body.preset))
    return model_out(s, model)


@router.post("/import/yaml", status_code=201, response_model=ModelOut, responses=WRITE)
def import_yaml(s: SessionDep, _: Writer, name: NameQuery, body: ModelYaml) -> ModelOut:
    doc = yaml_mapping(body, "body", "the body", "of model fields")
    doc.pop("name", None)
    model, _v = create_model(s, name, model_from_document(name, doc))
    return model_out(s, model)


add_list_get_delete(router, ModelRepository, model_out, ModelOut, "models", "model_id")


@router.post("/{model_id}/versions", response_model=VersionResult, responses=WRITE)
def new_version(model_id: RowId, body: ModelVersionCreate, s: SessionDep, _: Writer) -> VersionResult:
    repo = ModelRepository(s)
    model = repo.get(model_id)
    version, created = repo.record(model.id, _spec(model.name, body.spec, body.hf_config, body.preset))
    return VersionResult(created=created, version=version_out(version))


@router.get("/{model_id}/versions", response_model=PageOut[VersionOut], responses=NOT_FOUND)
def versions(model_id: RowId, s: SessionDep, _: Reader, page: Paging) -> PageOut[VersionOut]:
    repo = ModelRepository(s)
    p = repo.versions(repo.get(model_id), page)
    return page_out(p, [version_out(v) for v in p.items])
