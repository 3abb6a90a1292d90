"""The OpenAPI document says what this server enforces: settings-dependent bounds are written into it."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from swagger_ui_bundle import swagger_ui_path

from store.settings import Settings


def _page_limits(schema: dict[str, Any], max_page_size: int) -> None:
    """Every list's `limit` query parameter: the maximum is the configured max_page_size (api.deps.page_request)."""
    for operations in schema.get("paths", {}).values():
        for op in operations.values():
            for p in op.get("parameters", []) if isinstance(op, dict) else []:
                if p.get("name") == "limit" and p.get("in") == "query":
                    p["schema"]["maximum"] = max_page_size


DOCS_ASSETS = "/docs-assets"
"""Where Swagger UI's own files are served from the installed swagger-ui-bundle package: /docs works without
internet (FastAPI's default page loads them from a CDN and is blank offline) [issue 48 §8]."""


def install_docs(app: FastAPI) -> None:
    """/docs: Swagger UI from this server's own copy (create the app with docs_url=None and redoc_url=None)."""
    app.mount(DOCS_ASSETS, StaticFiles(directory=str(swagger_ui_path)), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title=f"{app.title}: API",
            swagger_js_url=f"{DOCS_ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{DOCS_ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{DOCS_ASSETS}/favicon-32x32.png",
        )


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
