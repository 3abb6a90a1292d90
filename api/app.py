"""The FastAPI application: /v1 resources, health, metrics and the web pages, on one database and one
dispatcher (Celery when REDIS_URL is set, else a background thread in this process)."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI, HTTPException
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api import errors, openapi_doc
from api.http_middleware import HttpMiddleware
from api.metrics import Metrics
from api.read_cache import ReadCache
from api.routers import acceptance, clusters, estimates, gpu_types, health, jobs, measurements, models, plans, watches
from api.security_headers import SecurityHeaders
from api.strict_json import refuse_booleans_as_numbers
from store.db import Database, database
from store.settings import Settings, settings
from workers.dispatch import CommittedSender, Dispatcher, InProcessDispatcher, make_dispatcher

log = logging.getLogger("meshplan.api")


class BodyLimit(HttpMiddleware):
    """413 for a request body above max_body_bytes, declared (Content-Length) or streamed (chunked): a streamed
    one raises an HTTPException from the body read, which FastAPI passes on as is (any other exception there it
    answers with an undocumented 400)."""

    def __init__(self, app: ASGIApp, limit: int, trace_limit: int | None = None) -> None:
        super().__init__(app)
        self.limit = limit
        self.trace_limit = trace_limit or limit

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        # a profiler trace upload has its own, larger limit (settings.max_trace_bytes)
        limit = self.trace_limit if str(scope.get("path", "")).endswith("/measurements/trace") else self.limit
        reason = f"request body above {limit} bytes"
        if declared is not None and (not declared.isdigit() or int(declared) > limit):
            await JSONResponse({"detail": reason}, status_code=413)(scope, receive, send)
            return
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > limit:
                raise HTTPException(413, reason)
            return message

        await self.app(scope, counted, send)


class RequestMetrics(HttpMiddleware):
    """Requests by method, route and status, and latency by route (plain ASGI: no extra task per request, as a
    BaseHTTPMiddleware would start)."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        super().__init__(app)
        self.metrics = metrics

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        t0 = time.perf_counter()
        status = 500

        async def sent(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sent)
        finally:
            path = getattr(scope.get("route"), "path", "unmatched")
            self.metrics.requests.labels(scope["method"], path, str(status)).inc()
            self.metrics.latency.labels(path).observe(time.perf_counter() - t0)


class ConcurrencyLimit(HttpMiddleware):
    """At most `limit` requests in the handlers at once; the others wait here, on the event loop, holding neither
    a worker thread nor a database connection. Without it 50 clients starved the thread pool: requests holding a
    connection waited for a thread held by requests waiting for a connection [issue 16]. /healthz is never
    queued."""

    EXEMPT = frozenset({"/healthz"})

    def __init__(self, app: ASGIApp, limit: int) -> None:
        super().__init__(app)
        self.limit = limit
        self._gate: asyncio.Semaphore | None = None

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("path") in self.EXEMPT:
            await self.app(scope, receive, send)
            return
        if self._gate is None:
            self._gate = asyncio.Semaphore(self.limit)
        async with self._gate:
            await self.app(scope, receive, send)


def _send_unsent(db: Database, dispatcher: Dispatcher) -> None:
    """At start-up, off the event loop: the queued jobs whose message the broker lost or never got."""
    from workers.service import send_unsent

    try:
        sent = send_unsent(db, dispatcher)
    except Exception as exc:  # the database or the broker is down: the sweep sends them later
        log.warning("unsent jobs not sent at start-up: %s", exc)
        return
    if sent:
        log.warning("jobs %s were committed and never sent (a stopped API process): sent now", sent)


def create_app(
    cfg: Settings | None = None, db: Database | None = None, dispatcher: Dispatcher | None = None
) -> FastAPI:
    cfg = cfg or settings()
    db = db or database(cfg.database_url)
    dispatcher = dispatcher or make_dispatcher(db, cfg)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if isinstance(dispatcher, InProcessDispatcher):  # embedded: pick up what a stopped process left
            from service.jobs import recover_interrupted

            dispatcher.start()
            try:
                with db.session() as s:
                    pending = recover_interrupted(s)
            except Exception as exc:  # the database is down: serve anyway (readyz says why), recover next start
                log.warning("interrupted jobs not recovered: %s", exc)
                pending = []
            for job_id in pending:
                dispatcher.enqueue(job_id)
        elif sender is not None:  # Celery: what a killed API process committed and never sent goes now
            threading.Thread(target=_send_unsent, args=(db, dispatcher), name="meshplan-unsent", daemon=True).start()
        yield
        if sender is not None:
            sender.close()  # what this process committed and has not sent yet goes now (or to the sweep)
        dispatcher.shutdown()

    app = FastAPI(
        title="meshplan",
        version="0.1.0",
        description="Plans how to split a large transformer over a GPU cluster: submit jobs, read the plan history.",
        lifespan=lifespan,
        docs_url=None,  # served from the package by openapi_doc.install_docs, not from a CDN
        redoc_url=None,  # ReDoc has no packaged copy: it would be a blank page without internet
        dependencies=[Depends(refuse_booleans_as_numbers)],  # true / false are not numbers [issue 47 item 3]
    )
    app.state.settings, app.state.db, app.state.dispatcher = cfg, db, dispatcher
    # Celery: jobs are sent from a thread of this process after their commit, not inside the request (api.deps)
    sender = CommittedSender(dispatcher) if dispatcher.mode == "celery" else None
    app.state.sender = sender
    app.state.metrics = Metrics(db)
    errors.install(app)
    for r in (gpu_types, clusters, models, jobs, plans, estimates, measurements, acceptance, watches, health):
        app.include_router(r.router)
    from api.pages import router as pages

    app.include_router(pages.router)
    pages.install(app)
    openapi_doc.install(app, cfg)
    openapi_doc.install_docs(app)

    app.add_middleware(RequestMetrics, metrics=app.state.metrics)
    app.add_middleware(BodyLimit, limit=cfg.max_body_bytes, trace_limit=cfg.max_trace_bytes)
    app.add_middleware(ConcurrencyLimit, limit=cfg.max_concurrent_requests)
    app.add_middleware(ReadCache, db=db, metrics=app.state.metrics, budget_bytes=cfg.read_cache_mb * 1_000_000)
    app.add_middleware(SecurityHeaders)  # outermost: every answer, the middlewares' own (413, 503) included
    return app
