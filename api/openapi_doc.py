"""The OpenAPI document says what this server enforces: settings-dependent bounds are written into it."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from store.settings import Settings


def _page_limits(schema: dict[str, Any], max_page_size: int) -> None:
    """Every list's `limit` query parameter: the maximum is the configured max_page_size (api.deps.page_request)."""
    for operations in schema.get("paths", {}).values():
        for op in operations.values():
            for p in op.get("parameters", []) if isinstance(op, dict) else []:
                if p.get("name") == "limit" and p.get("in") == "query":
                    p["schema"]["maximum"] = max_page_size


def install(app: FastAPI, cfg: Settings) -> None:
    """Wrap app.openapi so the generated (and cached) document carries this server's configured bounds."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = generate()
            _page_limits(schema, cfg.max_page_size)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
