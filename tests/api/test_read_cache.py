"""The plan reads served from memory (api.read_cache) are never staler than the database: a new plan, a revoked
token, a deleted cluster are seen at once; copies go only to the caller that was admitted; concurrent misses run
the handler once."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from starlette.types import Receive, Scope, Send

from api.metrics import Metrics
from api.read_cache import ReadCache
from store.db import Database
from store.migrate import upgrade
from store.repositories.tokens import TokenRepository
from tests.api.helpers import TRAINING, make_cluster, make_model, ok, wait_job
from tests.databases import settled


def _cache(app: Any) -> ReadCache:
    layer = app.middleware_stack
    while layer is not None and not isinstance(layer, ReadCache):
        layer = getattr(layer, "app", None)
    assert isinstance(layer, ReadCache), "the app serves plan reads through ReadCache"
    return layer


def _plan(c: TestClient, cluster: dict[str, Any], model: dict[str, Any]) -> int:
    body = {"cluster_id": cluster["id"], "model_id": model["id"], "workload": TRAINING, "time_limit_s": 10}
    job = wait_job(c, ok(c.post("/v1/jobs", json=body), 202)["id"])
    assert job["status"] == "succeeded", job
    plan_id: int = job["plan_id"]
    return plan_id


def test_history_is_served_from_memory_until_a_new_plan_commits(client: TestClient, api_db: Database) -> None:
    cluster, model = make_cluster(client), make_model(client)
    url = f"/v1/plans?cluster_id={cluster['id']}"
    first = _plan(client, cluster, model)
    assert [p["id"] for p in ok(client.get(url))["items"]] == [first]
    settled(api_db)  # the token's last-use note (once a minute) is a commit too
    assert [p["id"] for p in ok(client.get(url))["items"]] == [first]
    cache = _cache(client.app)
    hits = cache.hits
    assert [p["id"] for p in ok(client.get(url))["items"]] == [first]
    assert cache.hits == hits + 1
    for _ in range(3):  # each new plan retires the copy: the next read shows it
        newest = _plan(client, cluster, model)
        assert ok(client.get(url))["items"][0]["id"] == newest


def test_a_copy_goes_only_to_the_token_that_was_admitted(client: TestClient, tokens: dict[str, str]) -> None:
    cluster, model = make_cluster(client), make_model(client)
    plan_id = _plan(client, cluster, model)
    url = f"/v1/plans/{plan_id}"
    writer = ok(client.get(url))
    cache = _cache(client.app)
    hits = cache.hits
    as_reader = client.get(url, headers={"Authorization": f"Bearer {tokens['read']}"})
    assert ok(as_reader) == writer and cache.hits == hits  # another token: the handler ran
    assert client.get(url, headers={"Authorization": f"Bearer {tokens['revoked']}"}).status_code == 401
    assert client.get(url, headers={"Authorization": ""}).status_code == 401


def test_a_token_revoked_elsewhere_is_refused_at_once(client: TestClient, api_db: Database) -> None:
    cluster, model = make_cluster(client), make_model(client)
    plan_id = _plan(client, cluster, model)
    other = Database(api_db.url)  # another engine: what `meshplan token revoke` uses
    try:
        with other.session() as s:
            row, secret = TokenRepository(s).create("soon-revoked", ["read"])
        auth = {"Authorization": f"Bearer {secret}"}
        ok(client.get(f"/v1/plans/{plan_id}", headers=auth))
        ok(client.get(f"/v1/plans/{plan_id}", headers=auth))  # now a copy
        with other.session() as s:
            TokenRepository(s).revoke(row.id)
        # PostgreSQL delivers the revocation by NOTIFY; the feed refuses copies while one is unread, so no wait
        assert client.get(f"/v1/plans/{plan_id}", headers=auth).status_code == 401
    finally:
        other.dispose()


def test_a_deleted_clusters_plans_are_gone_at_once(client: TestClient) -> None:
    cluster, model = make_cluster(client), make_model(client)
    plan_id = _plan(client, cluster, model)
    ok(client.get(f"/v1/plans/{plan_id}"))
    ok(client.get(f"/v1/plans/{plan_id}"))
    ok(client.delete(f"/v1/clusters/{cluster['id']}"), 204)
    assert client.get(f"/v1/plans/{plan_id}").status_code == 404
    assert ok(client.get(f"/v1/plans?cluster_id={cluster['id']}"))["items"] == []


# --- the middleware alone, on a real SQLite feed -------------------------------------------------------------------


@pytest.fixture
def sqlite_db(tmp_path: Path) -> Iterator[Database]:
    url = f"sqlite:///{tmp_path / 'cache.db'}"
    upgrade(url)
    db = Database(url)
    yield db
    db.dispose()


class _Handler:
    """An ASGI app that answers /v1/plans/<n> with status n // 10 for n >= 1000 (else 200) after a pause, and counts."""

    def __init__(self) -> None:
        self.runs = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.runs += 1
        await asyncio.sleep(0.05)
        n = int(scope["path"].rsplit("/", 1)[1])
        status = n // 10 if n >= 1000 else 200
        body = json.dumps({"n": n, "pad": "x" * (n % 1000) * 100}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def _app(db: Database, budget: int) -> tuple[FastAPI, _Handler, ReadCache]:
    handler = _Handler()
    cache = ReadCache(handler, db=db, metrics=Metrics(db), budget_bytes=budget)
    return FastAPI(), handler, cache


async def _get(cache: ReadCache, path: str) -> httpx.Response:
    transport = httpx.ASGITransport(app=cache)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
        return await c.get(path, headers={"Authorization": "Bearer x"})


def test_concurrent_misses_run_the_handler_once(sqlite_db: Database) -> None:
    _fastapi, handler, cache = _app(sqlite_db, 1_000_000)

    async def burst() -> list[httpx.Response]:
        return await asyncio.gather(*(_get(cache, "/v1/plans/7") for _ in range(20)))

    answers = asyncio.run(burst())
    assert [r.status_code for r in answers] == [200] * 20
    assert len({r.content for r in answers}) == 1
    assert handler.runs == 1


def test_errors_are_not_kept_and_a_commit_retires_copies(sqlite_db: Database) -> None:
    _fastapi, handler, cache = _app(sqlite_db, 1_000_000)
    for _ in range(2):
        assert asyncio.run(_get(cache, "/v1/plans/4040")).status_code == 404
    assert handler.runs == 2  # a 404 is never served from memory
    for _ in range(2):
        asyncio.run(_get(cache, "/v1/plans/3"))
    assert handler.runs == 3
    with sqlite_db.session() as s:
        TokenRepository(s).create("moves-the-generation", ["read"])
    asyncio.run(_get(cache, "/v1/plans/3"))
    assert handler.runs == 4


def test_the_budget_bounds_what_is_kept(sqlite_db: Database) -> None:
    _fastapi, handler, cache = _app(sqlite_db, 50_000)
    for n in range(1, 40):  # bodies of about n * 100 bytes
        asyncio.run(_get(cache, f"/v1/plans/{n}"))
        assert cache.bytes <= cache.budget
    assert 0 < len(cache.entries) < 39
    asyncio.run(_get(cache, "/v1/plans/39"))  # the newest stayed
    assert handler.runs == 39
