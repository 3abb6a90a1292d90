"""Engines and sessions. One engine per process (created after a fork), sessions that commit at the boundary."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.orm import Session, sessionmaker

from store.changes import feed_for, track
from store.settings import settings

READ_ONLY = "meshplan_read_only"
"""Execution option of a read-only unit of work: on SQLite it begins DEFERRED (no write lock, WAL readers never
wait), where a writing one begins IMMEDIATE."""

# Connections: at least the API's concurrent requests (api.app ConcurrencyLimit) plus the job runner's, so a request
# never waits for a connection while holding a thread another request needs [issue 16: pool exhaustion deadlock].
POOL_SIZE, POOL_OVERFLOW, POOL_TIMEOUT_S = 20, 10, 10.0


def make_engine(url: str) -> Engine:
    """An engine for `url`. SQLite gets foreign keys, WAL and a busy timeout so that threads and processes can
    share the file; PostgreSQL gets pre-ping so that a restarted server is noticed."""
    if url.startswith("sqlite"):
        engine = create_engine(
            url,
            connect_args={"check_same_thread": False, "timeout": 30},
            pool_size=POOL_SIZE,
            max_overflow=POOL_OVERFLOW,
            pool_timeout=POOL_TIMEOUT_S,
        )

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn: Any, _record: Any) -> None:
            dbapi_conn.isolation_level = None  # let SQLAlchemy's BEGIN below take the write lock
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA busy_timeout=30000")
            cur.close()

        @event.listens_for(engine, "begin")
        def _begin(conn: Any) -> None:
            # Writers serialize at BEGIN (no lost updates, no upgrade deadlock); readers take no lock at all.
            read = conn.get_execution_options().get(READ_ONLY, False)
            conn.exec_driver_sql("BEGIN" if read else "BEGIN IMMEDIATE")

        return engine
    return create_engine(
        url, pool_pre_ping=True, pool_size=POOL_SIZE, max_overflow=POOL_OVERFLOW, pool_timeout=POOL_TIMEOUT_S
    )


class Database:
    """An engine and its session factory."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.engine = make_engine(url)
        self.sessions = sessionmaker(self.engine, expire_on_commit=False)
        self.read_sessions = sessionmaker(self.engine.execution_options(**{READ_ONLY: True}), expire_on_commit=False)
        self.changes = feed_for(self.engine.url)
        for maker in (self.sessions, self.read_sessions):
            track(maker, self.changes.PUBLISH, self.changes)

    @contextmanager
    def session(self, read_only: bool = False) -> Iterator[Session]:
        """A unit of work: commits when the block ends, rolls back on any error. `read_only` (a GET): on SQLite the
        transaction takes no write lock (a write inside it still works, but may meet a busy writer)."""
        with (self.read_sessions if read_only else self.sessions)() as s:
            try:
                yield s
                s.commit()
            except BaseException:
                s.rollback()
                raise

    def ping(self) -> str | None:
        """None when the database answers, else why not."""
        try:
            with self.engine.connect() as c:
                c.exec_driver_sql("SELECT 1")
        except Exception as exc:
            return f"unreachable: {type(exc).__name__}"
        return None

    def dispose(self) -> None:
        self.changes.close()
        self.engine.dispose()


_databases: dict[tuple[int, str], Database] = {}


def database(url: str | None = None) -> Database:
    """This process's database for `url` (default: the settings'). Keyed by PID: a forked worker builds its own."""
    url = url or settings().database_url
    key = (os.getpid(), url)
    if key not in _databases:
        _databases[key] = Database(url)
    return _databases[key]
