"""Ids are never reused (issue 37 item 6): on SQLite, the newest row's id came back once that row was deleted."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import create_engine, text
from sqlalchemy.orm import Session

from service.jobs import submit
from store.migrate import downgrade, upgrade
from store.models import Job
from tests.factories import cluster_and_model, training_request


def test_a_deleted_jobs_id_is_not_given_to_the_next_job(session: Session) -> None:
    cluster, model = cluster_and_model(session)
    job, _ = submit(session, training_request(cluster, model))
    gone = job.id
    session.delete(job)
    session.flush()
    nxt, _ = submit(session, training_request(cluster, model))
    assert nxt.id > gone and session.get(Job, gone) is None


def _reuses_the_deleted_id(url: str) -> bool:
    """Delete the newest change_generations row, insert one: does the new row take the deleted id?"""
    engine = create_engine(url)
    try:
        with engine.begin() as c:
            gone = c.execute(text("SELECT max(id) FROM change_generations")).scalar_one()
            c.execute(text("DELETE FROM change_generations WHERE id = :i"), {"i": gone})
            c.execute(text("INSERT INTO change_generations (n) VALUES (7)"))
            return bool(c.execute(text("SELECT max(id) FROM change_generations")).scalar_one() == gone)
    finally:
        engine.dispose()


def _rows(url: str) -> list[tuple[int, int]]:
    engine = create_engine(url)
    try:
        with engine.connect() as c:
            return [tuple(r) for r in c.execute(text("SELECT id, n FROM change_generations ORDER BY id"))]
    finally:
        engine.dispose()


def test_migration_0008_keeps_the_rows_and_stops_the_reuse_on_sqlite(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    upgrade(url, "0007")
    engine = create_engine(url)
    with engine.begin() as c:
        c.execute(text("INSERT INTO change_generations (n) VALUES (1), (2), (3)"))
    engine.dispose()
    assert _reuses_the_deleted_id(url)  # before 0008: SQLite's max(id)+1
    before = _rows(url)
    upgrade(url)
    assert _rows(url) == before
    assert not _reuses_the_deleted_id(url)
    downgrade(url, "0007")
    assert len(_rows(url)) == len(before)
