"""Which of the OpenAPI document's operations a request path is: the document's path templates, each parameter
matched as its schema types it (an integer parameter only by digits), so that `/v1/clusters/sync` is the sync
operation's path and not cluster "sync" of `/v1/clusters/{cluster_id}` [issue 47 item 3]."""

from __future__ import annotations

import re
from typing import Any

from fastapi import FastAPI


def _pattern(template: str, operations: dict[str, Any]) -> re.Pattern[str]:
    types: dict[str, str] = {}
    for op in operations.values():
        for p in op.get("parameters", []) if isinstance(op, dict) else []:
            if p.get("in") == "path":
                types[p["name"]] = str(p.get("schema", {}).get("type", "string"))
    out, last = [], 0
    for m in re.finditer(r"\{(\w+)\}", template):
        out.append(re.escape(template[last : m.start()]))
        out.append(r"[+-]?\d+" if types.get(m.group(1)) == "integer" else r"[^/]+")
        last = m.end()
    out.append(re.escape(template[last:]))
    return re.compile("".join(out))


def templates(app: FastAPI) -> list[tuple[str, re.Pattern[str]]]:
    """(template, its pattern) for every path of the app's document (built once per app)."""
    cached: list[tuple[str, re.Pattern[str]]] | None = getattr(app.state, "openapi_patterns", None)
    if cached is None:
        paths = app.openapi().get("paths", {})
        cached = [(t, _pattern(t, ops)) for t, ops in paths.items()]
        app.state.openapi_patterns = cached
    return cached


def operations(app: FastAPI, path: str) -> dict[str, tuple[str, dict[str, Any]]] | None:
    """{lower-case method: (template, operation)} of the document's paths that `path` is, or None when it is none
    of them."""
    doc_paths = app.openapi().get("paths", {})
    found: dict[str, tuple[str, dict[str, Any]]] = {}
    matched = False
    for template, pattern in templates(app):
        if pattern.fullmatch(path):
            matched = True
            for method, op in doc_paths[template].items():
                if isinstance(op, dict):
                    found.setdefault(method, (template, op))
    return found if matched else None
