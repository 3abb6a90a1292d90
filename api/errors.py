"""Every error a client can cause answered with a status and a reason: never a traceback, never a 500."""

from __future__ import annotations

import logging
import re

from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from sqlalchemy.exc import DataError, DBAPIError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException
from starlette.routing import Match

from api.openapi_paths import operations
from optimizer.errors import DomainError
from store.errors import ConflictError, NotFoundError
from workers.dispatch import BrokerUnavailable

log = logging.getLogger("meshplan.api")


# A path rooted at a file (config.json.hidden_act, model.yaml, slurm.conf): the file name is one location step.
_FILE_ROOT = re.compile(r"[^.]+\.(?:json|ya?ml|conf|toml)(?=\.|$)")


def field_steps(field: str) -> list[str]:
    """A DomainError's dotted field as location steps: split at the dots, a leading file name kept whole."""
    root = _FILE_ROOT.match(field)
    head = [root.group()] if root else []
    rest = field[root.end() + 1 :] if root else field
    return head + (rest.split(".") if rest else [])


def _loc(request: Request, field: str) -> list[str | int]:
    """Where a rule's field was given: a query or path parameter of that name (a path's `plan` is its `plan_id`),
    else the body, which only a POST, PUT or PATCH has: a GET's 422 never blames a body it does not have
    [issue 47 item 3]."""
    steps = field_steps(field)
    first = steps[0] if steps else ""
    if first in request.query_params:
        return ["query", *steps]
    if first in request.path_params or f"{first}_id" in request.path_params:
        return ["path", *steps]
    return ["body" if request.method in ("POST", "PUT", "PATCH") else "query", *steps]


METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def _other_path(request: Request, exc: RequestValidationError) -> bool:
    """Whether a path parameter failed because the request's path is another of the document's paths (matched as
    it types its parameters) that does not answer this method: `/v1/clusters/sync` is not cluster "sync"."""
    if not any(tuple(e.get("loc", ()))[:1] == ("path",) for e in exc.errors()):
        return False
    ops = operations(request.app, request.url.path)
    return ops is not None and request.method.lower() not in ops


def allowed_methods(request: Request) -> list[str]:
    """Every method some route of this path answers: Starlette's 405 names only the first path-matching route's
    (FastAPI keeps one route per method). A path of the OpenAPI document is read there, each path parameter
    matched as the document types it: `/v1/clusters/sync` answers POST only, not the GET and DELETE of cluster
    "sync" at `/v1/clusters/{cluster_id}` [issue 47 item 3]. Other paths (pages) are asked of each route through
    the public BaseRoute.matches."""
    ops = operations(request.app, request.url.path)
    if ops is not None:
        methods = {m.upper() for m in ops}
        return [m for m in METHODS if m in methods]
    routes = request.app.router.routes
    return [m for m in METHODS if any(r.matches({**request.scope, "method": m})[0] == Match.FULL for r in routes)]


def install(app: FastAPI) -> None:
    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> Response:
        if exc.status_code == 400 and exc.__cause__ is not None:  # FastAPI could not parse the body
            item = {
                "loc": ["body"],
                "msg": f"the body is not parseable JSON: {str(exc.__cause__)[:200]}",
                "type": "json_invalid",
            }
            return JSONResponse({"detail": [item]}, status_code=422)
        if exc.status_code == 405:
            exc = HTTPException(
                405, exc.detail, headers={**(exc.headers or {}), "Allow": ", ".join(allowed_methods(request))}
            )
        return await http_exception_handler(request, exc)

    @app.exception_handler(NotFoundError)
    async def not_found(_: Request, exc: NotFoundError) -> JSONResponse:
        return JSONResponse({"detail": exc.rule}, status_code=404)

    @app.exception_handler(ConflictError)
    async def conflict(_: Request, exc: ConflictError) -> JSONResponse:
        return JSONResponse({"detail": f"{exc.field}: {exc.rule}"}, status_code=409)

    @app.exception_handler(DomainError)
    async def domain(request: Request, exc: DomainError) -> JSONResponse:
        item = {"loc": _loc(request, exc.field), "msg": exc.rule, "type": "domain_rule"}
        return JSONResponse({"detail": [item]}, status_code=422)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> Response:
        if _other_path(request, exc):  # `GET /v1/clusters/sync`: the sync path, which has no GET [issue 59 item 3]
            allowed = allowed_methods(request)
            return JSONResponse(
                {"detail": f"Method Not Allowed: {request.url.path} answers {', '.join(allowed)}"},
                status_code=405,
                headers={"Allow": ", ".join(allowed)},
            )
        items = []
        for e in exc.errors():
            ctx = (e.get("ctx") or {}).get("error")
            if isinstance(ctx, DomainError):
                items.append(
                    {"loc": [*e.get("loc", ()), *field_steps(ctx.field)], "msg": ctx.rule, "type": "domain_rule"}
                )
            else:
                items.append({"loc": list(e.get("loc", ())), "msg": str(e.get("msg")), "type": str(e.get("type"))})
        return JSONResponse({"detail": items}, status_code=422)

    @app.exception_handler(OperationalError)
    async def db_down(_: Request, exc: OperationalError) -> JSONResponse:
        log.warning("database unavailable: %s", exc.orig)
        return JSONResponse({"detail": "database unavailable; retry later"}, status_code=503)

    @app.exception_handler(PoolTimeout)
    async def pool_exhausted(_: Request, exc: PoolTimeout) -> JSONResponse:
        log.warning("no database connection free: %s", exc)
        return JSONResponse({"detail": "server busy; retry later"}, status_code=503, headers={"Retry-After": "1"})

    @app.exception_handler(DataError)
    async def unstorable(_: Request, exc: DataError) -> JSONResponse:
        item = {
            "loc": ["body"],
            "msg": f"a value the database cannot store: {str(exc.orig).splitlines()[0]}",
            "type": "data_error",
        }
        return JSONResponse({"detail": [item]}, status_code=422)

    @app.exception_handler(DBAPIError)
    async def db_error(_: Request, exc: DBAPIError) -> JSONResponse:
        if exc.connection_invalidated:
            return JSONResponse({"detail": "database unavailable; retry later"}, status_code=503)
        log.exception("database error")
        return JSONResponse({"detail": "internal error"}, status_code=500)

    @app.exception_handler(BrokerUnavailable)
    async def broker_down(_: Request, exc: BrokerUnavailable) -> JSONResponse:
        return JSONResponse(
            {"detail": f"job queue unavailable ({exc}); nothing was stored, retry later"}, status_code=503
        )

    @app.exception_handler(Exception)
    async def unexpected(_: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error")
        return JSONResponse({"detail": "internal error"}, status_code=500)
