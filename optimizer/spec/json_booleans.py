"""Booleans and strings are not numbers: where a JSON Schema admits an integer (or a number) and no boolean, a true
or false is refused, and where it admits no string, a string ("16") [issue 59 item 3]. Pydantic's lax mode reads
true as 1 and false as 0 (`"cluster_id": true` made a job on cluster 1, `nics_per_node: false` a pool without
NICs) [issue 47 item 3], and "16" as 16; its strict mode would also refuse what the inputs take on purpose (ISO
date strings, whole-number floats), so this walks the value along the model's own schema."""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from typing import Any

from pydantic import BaseModel

from optimizer.errors import DomainError

NUMBERS = {"integer", "number"}


def _resolve(schema: Any, components: dict[str, Any]) -> dict[str, Any]:
    while isinstance(schema, dict) and "$ref" in schema:
        schema = components.get(str(schema["$ref"]).rsplit("/", 1)[-1], {})
    return schema if isinstance(schema, dict) else {}


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    return {float: "number", str: "string", list: "array", dict: "object"}.get(type(value), "null")


def _alternatives(schema: dict[str, Any], components: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The schema and every schema its anyOf / oneOf / allOf name, resolved, depth first."""
    yield schema
    for key in ("anyOf", "oneOf", "allOf"):
        for sub in schema.get(key, []):
            yield from _alternatives(_resolve(sub, components), components)


def _types(schema: dict[str, Any], components: dict[str, Any]) -> set[str]:
    """The JSON types a schema admits ("any" when it does not say)."""
    out: set[str] = set()
    said = False
    for sub in _alternatives(schema, components):
        kind = sub.get("type")
        if kind is not None:
            said = True
            out |= {kind} if isinstance(kind, str) else set(kind)
        if "const" in sub:
            said = True
            out.add(_json_type(sub["const"]))
        if "enum" in sub:
            said = True
            out |= {_json_type(v) for v in sub["enum"]}
    return out if said else {"any"}


def _confused(value: Any, types: set[str]) -> bool:
    """A boolean, or a string, where the schema admits numbers and neither booleans nor strings (pydantic's lax mode
    reads "16" as 16 and true as 1) [issue 59 item 3]."""
    if not types & NUMBERS or "any" in types:
        return False
    if isinstance(value, bool):
        return "boolean" not in types
    return isinstance(value, str) and "string" not in types


def booleans_as_numbers(
    value: Any, schema: dict[str, Any], components: dict[str, Any], loc: tuple[str | int, ...] = ("body",)
) -> Iterator[tuple[str | int, ...]]:
    """Where `value` holds a boolean or a string at a place `schema` admits numbers but neither of them."""
    schema = _resolve(schema, components)
    if isinstance(value, bool | str):
        if _confused(value, _types(schema, components)):
            yield loc
        return
    if isinstance(value, dict):
        for key, item in value.items():
            subs = []
            for alt in _alternatives(schema, components):
                prop = alt.get("properties", {}).get(key)
                if prop is None and isinstance(alt.get("additionalProperties"), dict):
                    prop = alt["additionalProperties"]
                if prop is not None:
                    subs.append(_resolve(prop, components))
            if not subs:
                continue
            if isinstance(item, bool | str):  # refused only when no alternative admits it
                if _confused(item, set().union(*(_types(s, components) for s in subs))):
                    yield (*loc, key)
                continue
            found: set[tuple[str | int, ...]] = set()
            for sub in subs:
                found |= set(booleans_as_numbers(item, sub, components, (*loc, key)))
            yield from sorted(found, key=str)
    elif isinstance(value, list):
        items = [a["items"] for a in _alternatives(schema, components) if isinstance(a.get("items"), dict)]
        for i, item in enumerate(value):
            found = set()
            for sub in items:
                found |= set(booleans_as_numbers(item, sub, components, (*loc, i)))
            yield from sorted(found, key=str)


def number_rule(value: Any) -> str:
    """What a refused value is told."""
    kind = "a boolean (true / false)" if isinstance(value, bool) else "a string"
    return f"must be a number, not {kind}"


def value_at(data: Any, loc: tuple[str | int, ...]) -> Any:
    for step in loc:
        data = data[step]
    return data


@cache
def _model_schema(model: type[BaseModel]) -> dict[str, Any]:
    return model.model_json_schema()


def refuse_booleans(model: type[BaseModel], data: Any, prefix: str) -> None:
    """A DomainError naming the first place `data` holds a boolean where `model`'s schema takes a number."""
    schema = _model_schema(model)
    for loc in booleans_as_numbers(data, schema, schema.get("$defs", {}), ()):
        field = ".".join([prefix, *(str(step) for step in loc)])
        raise DomainError(field, number_rule(value_at(data, loc)))
