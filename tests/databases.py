"""Real databases for the tests: a fresh PostgreSQL database per run on the local server, and a SQLite file.
Under CI=true a missing PostgreSQL server fails the tests that need it; elsewhere they skip."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from sqlalchemy import create_engine, text

from store.changes import wait_listening
from store.db import Database
from store.migrate import upgrade

PG_ADMIN_URL = os.environ.get("MESHPLAN_TEST_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/test")


def require(reason: str) -> None:
    """Fail under CI, skip elsewhere."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason} (CI=true: a test that needs a server fails when it is missing)")
    pytest.skip(reason)


def create_pg_database() -> tuple[str, str]:
    """A new empty database on the local server: (its URL, its name)."""
    name = f"meshplan_test_{uuid.uuid4().hex[:10]}"
    try:
        admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
        with admin.connect() as c:
            c.execute(text(f'CREATE DATABASE "{name}"'))
        admin.dispose()
    except Exception as exc:
        require(f"PostgreSQL at {PG_ADMIN_URL} is not reachable: {type(exc).__name__}: {exc}".splitlines()[0])
    return PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}", name


def drop_pg_database(name: str) -> None:
    admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


@contextmanager
def migrated_pg_database() -> Iterator[str]:
    """A new database on the local server migrated to the newest schema, dropped on exit: its URL."""
    url, name = create_pg_database()
    upgrade(url)
    try:
        yield url
    finally:
        drop_pg_database(name)


def settled(db: Database) -> int:
    """The change generation (store.changes) once the notifications of earlier commits have arrived."""
    assert wait_listening(db.changes)
    g = db.changes.generation()
    deadline = time.monotonic() + 0.3
    while time.monotonic() < deadline:
        time.sleep(0.05)
        now = db.changes.generation()
        if now != g:
            g, deadline = now, time.monotonic() + 0.3
    assert g is not None
    return g
