"""The change generation behind the API's read cache moves with every commit that can alter a cached read, from
this process or another one, and with no other (store.changes)."""

from __future__ import annotations

import time

from sqlalchemy import delete, update

from store.changes import PostgresChanges, SqliteChanges
from store.db import Database
from store.models import Job
from store.repositories.tokens import TokenRepository
from tests.databases import settled


def _moved_within(db: Database, before: int | None, timeout_s: float = 3.0) -> bool:
    """Whether the generation leaves `before` within the timeout (a notification from another connection)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        now = db.changes.generation()
        if now is not None and now != before:
            return True
        time.sleep(0.02)
    return False


def test_a_token_change_moves_the_generation_and_a_job_heartbeat_does_not(db: Database) -> None:
    g0 = settled(db)
    with db.session() as s:
        s.execute(update(Job).where(Job.id == -1).values(heartbeat_at=None))  # a job's own bookkeeping
    assert settled(db) == g0
    with db.session() as s:
        row, _secret = TokenRepository(s).create("changes", ["read"])
    g1 = settled(db)
    assert g1 != g0
    with db.session() as s:
        TokenRepository(s).revoke(row.id)
    assert settled(db) != g1


def test_a_delete_of_jobs_moves_it(db: Database) -> None:
    """ON DELETE CASCADE takes plans with their job: any delete publishes."""
    g0 = settled(db)
    with db.session() as s:
        s.execute(delete(Job).where(Job.id == -1))
    assert settled(db) != g0


def test_a_rolled_back_write_does_not_move_it(db: Database) -> None:
    g0 = settled(db)
    try:
        with db.session() as s:
            TokenRepository(s).create("rolled-back", ["read"])
            s.flush()
            raise RuntimeError("abort")
    except RuntimeError:
        pass
    assert settled(db) == g0


def test_a_commit_through_another_engine_moves_it(db: Database) -> None:
    """Another engine stands for another process (a Celery worker, the CLI): its commit reaches this feed."""
    g0 = settled(db)
    other = Database(db.url)
    try:
        with other.session() as s:
            TokenRepository(s).create("elsewhere", ["read"])
    finally:
        other.dispose()
    assert _moved_within(db, g0)


def test_an_unknowable_generation_is_none() -> None:
    assert SqliteChanges(None).generation() is None  # in-memory: no other connection sees it
    down = PostgresChanges(Database("postgresql+psycopg://postgres@127.0.0.1:1/none").engine.url)
    try:
        assert down.generation() is None
        time.sleep(0.3)
        assert down.generation() is None
    finally:
        down.close()


def test_a_lost_listener_forgets_its_generation_and_comes_back_moved(pg_url: str) -> None:
    """PostgreSQL: when the listening connection dies (a server restart), commits may pass unheard, so the feed
    says "unknown" until it listens again, and then reports a generation no copy was tagged with. (SQLite reads
    its counter row on every request: nothing to lose.)"""
    db = Database(pg_url)
    try:
        _lose_the_listener(db)
    finally:
        db.dispose()


def _lose_the_listener(db: Database) -> None:
    before = settled(db)
    with db.engine.connect() as c:
        killed = c.exec_driver_sql(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND query LIKE 'LISTEN %%' AND pid <> pg_backend_pid()"
        ).scalar()
    assert killed and killed >= 1
    deadline = time.monotonic() + 5
    saw_unknown = False
    while time.monotonic() < deadline and not saw_unknown:
        saw_unknown = db.changes.generation() is None
        time.sleep(0.005)
    assert saw_unknown, "the feed kept answering while nobody listened"
    assert settled(db) != before
