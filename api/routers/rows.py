"""Routes every row resource has, registered once: the newest-first page of its rows, one row by id, delete by
id. FastAPI reads a route's parameters from its endpoint's signature, so the id parameter is given the
resource's name (`cluster_id`...) there: the OpenAPI document names it as a hand-written route would."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, TypeVar

from fastapi import APIRouter
from pydantic import BaseModel
from sqlalchemy.orm import Session

from api.convert import page_out
from api.deps import Paging, Reader, RowId, SessionDep, Writer
from api.responses import NOT_FOUND
from api.schemas import PageOut
from store.models import Base
from store.repositories.base import Repository

M = TypeVar("M", bound=Base)
Out = TypeVar("Out", bound=BaseModel)


def add_list_get_delete(
    router: APIRouter,
    repository: Callable[[Session], Repository[M]],
    convert: Callable[[Session, M], Out],
    out: type[Out],
    plural: str,
    key: str,
) -> None:
    """GET "" (a page, newest first: route `list_{plural}`), GET /{key} (`get`) and DELETE /{key} (`delete`, 204)
    of one resource, in that order; rows become `out` bodies through `convert`."""

    def list_rows(s: SessionDep, _: Reader, page: Paging) -> PageOut[Any]:
        p = repository(s).page(page)
        return page_out(p, [convert(s, row) for row in p.items])

    def get(row_id: RowId, s: SessionDep, _: Reader) -> Out:
        return convert(s, repository(s).get(row_id))

    def delete(row_id: RowId, s: SessionDep, _: Writer) -> None:
        repository(s).delete(row_id)

    router.add_api_route("", list_rows, methods=["GET"], response_model=PageOut[out], name=f"list_{plural}")  # type: ignore[valid-type]
    router.add_api_route(f"/{{{key}}}", keyed(get, key), methods=["GET"], response_model=out, responses=NOT_FOUND)
    router.add_api_route(f"/{{{key}}}", keyed(delete, key), methods=["DELETE"], status_code=204, responses=NOT_FOUND)


R = TypeVar("R")


def keyed(endpoint: Callable[..., R], key: str) -> Callable[..., R]:
    """`endpoint`, whose parameter `row_id` FastAPI sees (and passes) as `key`; the route keeps its name."""
    sig = inspect.signature(endpoint, eval_str=True)
    params = [p.replace(name=key) if p.name == "row_id" else p for p in sig.parameters.values()]

    def call(**kwargs: Any) -> R:
        kwargs["row_id"] = kwargs.pop(key)
        return endpoint(**kwargs)

    call.__name__ = endpoint.__name__
    call.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
    return call
