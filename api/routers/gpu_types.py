"""GET/POST /v1/gpu-types: the built-in catalog plus user-defined types."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Body

from api.deps import Reader, SessionDep, Writer
from api.responses import STANDARD, WRITE
from api.schemas import GpuTypeOut
from optimizer.spec.gpu_catalog import BUILTIN_GPUS, GPUSpec
from service.catalog import gpu_from_document
from store.repositories.gpu_types import GpuTypeRepository

router = APIRouter(prefix="/v1/gpu-types", tags=["gpu-types"], responses=STANDARD)


@router.get("", response_model=list[GpuTypeOut])
def list_gpu_types(s: SessionDep, _: Reader) -> list[GpuTypeOut]:
    builtin = [GpuTypeOut(name=n, builtin=True, spec=g) for n, g in BUILTIN_GPUS.items()]
    custom = [
        GpuTypeOut(name=r.name, builtin=False, spec=GPUSpec.model_validate(r.spec)) for r in GpuTypeRepository(s).list()
    ]
    return builtin + custom


@router.post("", status_code=201, response_model=GpuTypeOut, responses=WRITE)
def create_gpu_type(s: SessionDep, _: Writer, body: dict[str, Any] = Body(...)) -> GpuTypeOut:  # noqa: B008
    spec = gpu_from_document(body)
    GpuTypeRepository(s).create(spec)
    return GpuTypeOut(name=spec.name, builtin=False, spec=spec)
