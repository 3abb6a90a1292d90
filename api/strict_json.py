"""Booleans and strings are not numbers at the API: a JSON true or false (or a string) where the request body's
schema says integer (or number) is refused with a 422 naming the field (optimizer/spec/json_booleans.py), checked
against the same OpenAPI document clients read, before the body is validated [issue 47 item 3]; a body naming a key
twice is refused too, whatever the spelling of its JSON media type [issue 59 item 3]."""

from __future__ import annotations

import json

from fastapi import Request
from fastapi.exceptions import RequestValidationError

from api.openapi_paths import operations
from optimizer.spec.json_booleans import booleans_as_numbers, number_rule, value_at
from optimizer.spec.yaml_documents import DuplicateKey, unique_keys

BODY_METHODS = ("POST", "PUT", "PATCH")


async def refuse_booleans_as_numbers(request: Request) -> None:
    """An app-wide dependency: the route's JSON body against its request-body schema in the app's OpenAPI."""
    if request.method not in BODY_METHODS or "json" not in request.headers.get("content-type", "").lower():
        return
    found = (operations(request.app, request.url.path) or {}).get(request.method.lower())
    schema = (
        found[1].get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema") if found else None
    )
    if schema is None:
        return
    try:
        body = json.loads(await request.body(), object_pairs_hook=unique_keys)
    except DuplicateKey as exc:  # json.loads keeps the last of two values silently [issue 59 item 3]
        item = {"loc": ["body"], "msg": f"names a key twice: {exc}", "type": "value_error"}
        raise RequestValidationError([item]) from None
    except ValueError:  # not JSON: the body's own validation says so
        return
    doc = request.app.openapi()
    bad = list(booleans_as_numbers(body, schema, doc.get("components", {}).get("schemas", {})))
    if bad:
        raise RequestValidationError(
            [{"loc": loc, "msg": number_rule(value_at(body, loc[1:])), "type": "int_type"} for loc in bad]
        )
