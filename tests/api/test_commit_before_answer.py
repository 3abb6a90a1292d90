"""A client that has its 201 or 202 finds what it wrote: the request's unit of work commits before the response is
sent, so a slow commit delays the answer instead of racing it (api/deps.py SessionDep, scope="function")."""

from __future__ import annotations

import time
from typing import Any

import httpx
from sqlalchemy import event

from store.db import Database
from store.models import Cluster
from tests.api.helpers import INVENTORY, name

COMMIT_DELAY_S = 0.5


def test_a_write_is_committed_before_its_answer(server: str, api_db: Database, tokens: dict[str, str]) -> None:
    def slow_commit(_session: Any) -> None:  # a busy disk: the commit takes half a second
        time.sleep(COMMIT_DELAY_S)

    event.listen(api_db.sessions, "before_commit", slow_commit)
    try:
        with httpx.Client(base_url=server, headers={"Authorization": f"Bearer {tokens['write']}"}) as c:
            t0 = time.monotonic()
            r = c.post("/v1/clusters", json={"name": name("c"), "inventory": INVENTORY})
            answered = time.monotonic() - t0
        assert r.status_code == 201, r.text
        with api_db.session(read_only=True) as s:  # read at once, on another connection
            assert s.get(Cluster, r.json()["id"]) is not None, "answered 201 before the commit"
        assert answered >= COMMIT_DELAY_S
    finally:
        event.remove(api_db.sessions, "before_commit", slow_commit)
