"""The real app on a real PostgreSQL database (fresh per run) with jobs run in-process."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from store.db import Database
from store.migrate import upgrade
from store.repositories.tokens import TokenRepository
from store.settings import Settings
from tests.databases import create_pg_database, drop_pg_database


@pytest.fixture(scope="session")
def api_db_url() -> Iterator[str]:
    url, name = create_pg_database()
    upgrade(url)
    yield url
    drop_pg_database(name)


@pytest.fixture(scope="session")
def api_settings(api_db_url: str) -> Settings:
    return Settings(database_url=api_db_url, max_time_limit_s=120, max_body_bytes=200_000, max_page_size=50)


@pytest.fixture(scope="session")
def api_db(api_settings: Settings) -> Iterator[Database]:
    db = Database(api_settings.database_url)
    yield db
    db.dispose()


@pytest.fixture(scope="session")
def tokens(api_db: Database) -> dict[str, str]:
    with api_db.session() as s:
        repo = TokenRepository(s)
        _w, write = repo.create("writer", ["write"])
        _r, read = repo.create("reader", ["read"])
        revoked_row, revoked = repo.create("old", ["write"])
        repo.revoke(revoked_row.id)
    return {"write": write, "read": read, "revoked": revoked}


@pytest.fixture(scope="session")
def client(api_settings: Settings, api_db: Database, tokens: dict[str, str]) -> Iterator[TestClient]:
    app = create_app(api_settings, api_db)
    with TestClient(app, raise_server_exceptions=False) as c:
        c.headers["Authorization"] = f"Bearer {tokens['write']}"
        yield c
