"""A token's last use is recorded beside the request, never inside it: on SQLite a write request holds the write
lock until it commits, and a note written from inside it waited out the 30 s busy timeout and failed [issue 16]."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from store.db import Database
from store.migrate import upgrade
from store.models import ApiToken
from store.repositories.tokens import TokenRepository
from store.settings import Settings
from tests.api.helpers import INVENTORY, name


def test_first_write_of_a_token_records_its_use_on_sqlite(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    url = f"sqlite:///{tmp_path / 'embedded.db'}"
    upgrade(url)
    db = Database(url)
    with db.session() as s:
        row, secret = TokenRepository(s).create("writer", ["write"])
        token_id = row.id
    caplog.set_level(logging.WARNING, logger="meshplan.api")
    with TestClient(create_app(Settings(database_url=url), db)) as c:
        c.headers["Authorization"] = f"Bearer {secret}"
        r = c.post("/v1/clusters", json={"name": name("c"), "inventory": INVENTORY})
        assert r.status_code == 201, r.text
        deadline = time.monotonic() + 30
        while True:
            with db.session(read_only=True) as s:
                used = s.get(ApiToken, token_id).last_used_at  # type: ignore[union-attr]
            if used is not None or time.monotonic() > deadline:
                break
            time.sleep(0.05)
    db.dispose()
    assert used is not None
    assert not [r for r in caplog.records if "last use not recorded" in r.getMessage()]
