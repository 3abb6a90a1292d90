"""The FastAPI application: /v1 resources, health, metrics and the web pages, on one database and one
dispatcher (Celery when REDIS_URL is set, else a background thread in this process)."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api import errors
from api.metrics import Metrics
from api.routers import clusters, gpu_types, health, jobs, models, plans, watches
from store.db import Database, database
from store.settings import Settings, settings
from workers.dispatch import Dispatcher, InProcessDispatcher, make_dispatcher

log = logging.getLogger("meshplan.api")


class BodyLimit:
    """413 for a request body above max_body_bytes (declared or streamed)."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        too_big = JSONResponse({"detail": f"request body above {self.limit} bytes"}, status_code=413)
        if declared is not None and (not declared.isdigit() or int(declared) > self.limit):
            await too_big(scope, receive, send)
            return
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.limit:
                raise _TooBig
            return message

        try:
            await self.app(scope, counted, send)
        except _TooBig:
            await too_big(scope, receive, send)


class _TooBig(Exception):
    pass


def create_app(
    cfg: Settings | None = None, db: Database | None = None, dispatcher: Dispatcher | None = None
) -> FastAPI:
    cfg = cfg or settings()
    db = db or database(cfg.database_url)
    dispatcher = dispatcher or make_dispatcher(db, cfg)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if isinstance(dispatcher, InProcessDispatcher):  # embedded: pick up what a stopped process left
            from store.services.jobs import recover_interrupted

            try:
                with db.session() as s:
                    pending = recover_interrupted(s)
            except Exception as exc:  # the database is down: serve anyway (readyz says why), recover next start
                log.warning("interrupted jobs not recovered: %s", exc)
                pending = []
            for job_id in pending:
                dispatcher.enqueue(job_id)
        yield
        dispatcher.shutdown()

    app = FastAPI(
        title="meshplan",
        version="0.1.0",
        description="Plans how to split a large transformer over a GPU cluster: submit jobs, read the plan history.",
        lifespan=lifespan,
    )
    app.state.settings, app.state.db, app.state.dispatcher = cfg, db, dispatcher
    app.state.metrics = Metrics(db)
    errors.install(app)
    for r in (gpu_types, clusters, models, jobs, plans, watches, health):
        app.include_router(r.router)
    from api.pages import router as pages

    app.include_router(pages.router)
    pages.install(app)

    @app.middleware("http")
    async def count(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        t0 = time.perf_counter()
        response = await call_next(request)
        route: Any = request.scope.get("route")
        path = getattr(route, "path", "unmatched")
        app.state.metrics.requests.labels(request.method, path, str(response.status_code)).inc()
        app.state.metrics.latency.labels(path).observe(time.perf_counter() - t0)
        return response

    app.add_middleware(BodyLimit, limit=cfg.max_body_bytes)
    return app
