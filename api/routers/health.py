"""/healthz (process up), /readyz (database and broker reachable), /metrics (Prometheus)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from api.schemas import Health
from store.db import Database
from workers.dispatch import Dispatcher

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=Health, response_model_exclude_none=True)
async def healthz() -> Health:
    """On the event loop (no worker thread, no database): answers while every thread is busy. Only the process's
    status: /readyz says the database's and the broker's (it answered them as nulls) [issue 48 §10]."""
    return Health(status="ok")


@router.get("/readyz", response_model=Health, responses={503: {"model": Health}})
def readyz(request: Request) -> Response:
    db: Database = request.app.state.db
    dispatcher: Dispatcher = request.app.state.dispatcher
    database = db.ping() or "ok"
    broker = dispatcher.problem() or "ok"
    ok = database == "ok" and broker == "ok"
    body = Health(status="ok" if ok else "unavailable", database=database, broker=broker, mode=dispatcher.mode)
    return JSONResponse(body.model_dump(), status_code=200 if ok else 503)


@router.get("/metrics", response_class=Response, responses={200: {"content": {"text/plain": {}}}})
def metrics(request: Request) -> Response:
    return Response(generate_latest(request.app.state.metrics.registry), media_type=CONTENT_TYPE_LATEST)
