"""Store fixtures: both backends, migrated by Alembic; each test in a transaction rolled back at the end."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.orm import Session

from store.db import Database
from store.migrate import upgrade
from tests.databases import create_pg_database, drop_pg_database


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    url, name = create_pg_database()
    upgrade(url)
    yield url
    drop_pg_database(name)


@pytest.fixture(scope="session")
def sqlite_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{Path(tmp_path_factory.mktemp('db')) / 'meshplan.db'}"
    upgrade(url)
    return url


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request: pytest.FixtureRequest) -> Iterator[Database]:
    url = request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "pg_url")
    database = Database(url)
    yield database
    database.dispose()


@pytest.fixture
def session(db: Database) -> Iterator[Session]:
    """A session inside an outer transaction that is rolled back: nothing a test writes survives it."""
    with db.engine.connect() as conn:
        outer = conn.begin()
        s = Session(bind=conn, join_transaction_mode="create_savepoint", expire_on_commit=False)
        try:
            yield s
        finally:
            s.close()
            outer.rollback()
