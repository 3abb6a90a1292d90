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


# OpenAPI links: where an answer's ids lead (a client, or schemathesis' stateful run, follows them from a created
# cluster to its job, the job to its plan, the plan to its measurements; a watch to its re-plan) [issue 47 item 3].
# (source path, method, status) -> [(link name, target path, method, parameters, requestBody)]
_Link = tuple[str, str, str, dict[str, str], dict[str, str] | None]
LINKS: dict[tuple[str, str, str], list[_Link]] = {
    ("/v1/clusters", "post", "201"): [
        ("GetCluster", "/v1/clusters/{cluster_id}", "get", {"cluster_id": "$response.body#/id"}, None),
        ("ClusterRevisions", "/v1/clusters/{cluster_id}/revisions", "get", {"cluster_id": "$response.body#/id"}, None),
        ("SubmitJob", "/v1/jobs", "post", {}, {"cluster_id": "$response.body#/id"}),
        ("CreateWatch", "/v1/watches", "post", {}, {"cluster_id": "$response.body#/id"}),
    ],
    ("/v1/models", "post", "201"): [
        ("GetModel", "/v1/models/{model_id}", "get", {"model_id": "$response.body#/id"}, None),
        ("ModelVersions", "/v1/models/{model_id}/versions", "get", {"model_id": "$response.body#/id"}, None),
    ],
    ("/v1/jobs", "post", "202"): [
        ("GetJob", "/v1/jobs/{job_id}", "get", {"job_id": "$response.body#/id"}, None),
    ],
    ("/v1/jobs/{job_id}", "get", "200"): [
        ("GetPlan", "/v1/plans/{plan_id}", "get", {"plan_id": "$response.body#/plan_id"}, None),
    ],
    ("/v1/plans/{plan_id}", "get", "200"): [
        ("AddMeasurement", "/v1/plans/{plan_id}/measurements", "post", {"plan_id": "$response.body#/id"}, None),
        ("ListMeasurements", "/v1/plans/{plan_id}/measurements", "get", {"plan_id": "$response.body#/id"}, None),
        ("NextMeasurement", "/v1/plans/{plan_id}/next-measurement", "get", {"plan_id": "$response.body#/id"}, None),
        ("ExportPlan", "/v1/plans/{plan_id}/export/{tool}", "get", {"plan_id": "$response.body#/id"}, None),
    ],
    ("/v1/plans/{plan_id}/measurements", "post", "201"): [
        (
            "DeleteMeasurement",
            "/v1/plans/{plan_id}/measurements/{measurement_id}",
            "delete",
            {"plan_id": "$request.path.plan_id", "measurement_id": "$response.body#/id"},
            None,
        ),
    ],
    ("/v1/watches", "post", "201"): [
        ("GetWatch", "/v1/watches/{watch_id}", "get", {"watch_id": "$response.body#/id"}, None),
        ("ReplanWatch", "/v1/watches/{watch_id}/replan", "post", {"watch_id": "$response.body#/id"}, None),
    ],
}


def _links(schema: dict[str, Any]) -> None:
    """Write LINKS into the responses they start from, naming each target by its operationId."""
    paths = schema.get("paths", {})
    for (path, method, status), links in LINKS.items():
        response = paths[path][method]["responses"][status]
        out = response.setdefault("links", {})
        for name, target, target_method, parameters, body in links:
            link: dict[str, Any] = {"operationId": paths[target][target_method]["operationId"]}
            if parameters:
                link["parameters"] = parameters
            if body is not None:
                link["requestBody"] = body
            out[name] = link


def install(app: FastAPI, cfg: Settings) -> None:
    """Wrap app.openapi so the generated (and cached) document carries this server's configured bounds."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = generate()
            _page_limits(schema, cfg.max_page_size)
            _links(schema)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
