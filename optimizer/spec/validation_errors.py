"""Turn pydantic's ValidationError into a DomainError that names the field and the rule."""

from __future__ import annotations

import difflib
import types
import typing
from typing import Any

from pydantic import BaseModel, ValidationError

from optimizer.errors import DomainError


def _union_tag(part: object) -> bool:
    """pydantic's name for a union member in an error path (`int`, `list[Node]`)."""
    return isinstance(part, str) and ("[" in part or part in ("int", "str", "float", "bool"))


def _named(loc: tuple[Any, ...], data: object) -> list[object]:
    """The error path with a list index replaced by the item's `name` where it has one: `pools.h100`, not
    `pools.0` [issue 48 §10]."""
    out: list[object] = []
    node = data
    for part in loc:
        item = None
        if isinstance(part, int) and isinstance(node, list) and 0 <= part < len(node):
            item = node[part]
            name = item.get("name") if isinstance(item, dict) else None
            out.append(name if isinstance(name, str) and name and "." not in name else part)
        else:
            out.append(part)
            if isinstance(node, dict):
                item = node.get(part)
        node = item
    return out


def _unwrap(t: object) -> object:
    """A type without Optional / Annotated; of a union, its model or container member."""
    while True:
        origin = typing.get_origin(t)
        if origin in (typing.Union, types.UnionType):
            members = [a for a in typing.get_args(t) if a is not type(None)]
            rich = [
                a
                for a in members
                if (isinstance(a, type) and issubclass(a, BaseModel)) or typing.get_origin(a) in (list, tuple, dict)
            ]
            t = (rich or members or [None])[0]
        elif origin is typing.Annotated:
            t = typing.get_args(t)[0]
        else:
            return t


def _model_at(model: type[BaseModel], loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The pydantic model whose field the error path's last key was tried as (through lists, dicts and
    optionals), or None."""
    current: object = model
    for part in loc[:-1]:
        current = _unwrap(current)
        if isinstance(current, type) and issubclass(current, BaseModel):
            if not isinstance(part, str) or part not in current.model_fields:
                return None
            current = current.model_fields[part].annotation
            continue
        origin = typing.get_origin(current)
        if origin in (list, tuple):
            current = typing.get_args(current)[0]
        elif origin is dict:
            current = typing.get_args(current)[1]
        else:
            return None
    current = _unwrap(current)
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def domain_error_from_validation(
    exc: ValidationError, prefix: str, data: object = None, model: type[BaseModel] | None = None
) -> DomainError:
    """The first error of `exc` as a DomainError with a dotted field path under `prefix`. With the input `data`, a
    list item with a name is named (`pools.h100`); with the `model`, a misspelt key gets "did you mean"."""
    errors = exc.errors()
    # A union (`nodes: int | list[Node]`) reports one error per member: the deepest path is the informative one.
    err = max(errors, key=lambda e: len(e.get("loc", ())))
    path = tuple(p for p in err.get("loc", ()) if p != "__root__" and not _union_tag(p))
    loc = ".".join(str(p) for p in (_named(path, data) if data is not None else path))
    ctx_error = (err.get("ctx") or {}).get("error")
    if isinstance(ctx_error, DomainError):
        return ctx_error
    field = f"{prefix}.{loc}" if loc else prefix
    value = err.get("input")
    shown = f" (got {value!r})" if isinstance(value, int | float | str) and len(repr(value)) < 40 else ""
    hint = ""
    if err.get("type") == "extra_forbidden" and model is not None and path and isinstance(path[-1], str):
        owner = _model_at(model, path)
        close = difflib.get_close_matches(path[-1], list(owner.model_fields), n=1) if owner else []
        hint = f"; did you mean {close[0]!r}?" if close else ""
    if err.get("type") == "missing" and path and isinstance(path[-1], str):  # given under a misspelt key?
        extras = [
            str(e["loc"][-1])
            for e in errors
            if e.get("type") == "extra_forbidden" and tuple(e["loc"][:-1]) == tuple(err["loc"][:-1])
        ]
        close = difflib.get_close_matches(path[-1], extras, n=1)
        hint = f"; {close[0]!r} was given: did you mean {path[-1]!r}?" if close else ""
    return DomainError(field, f"{err['msg']}{shown}{hint}")
