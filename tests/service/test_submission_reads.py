"""A submission reads what it must in one query and writes one row (issue 49): the cluster at its revision, the
model at its version, the stored workload and the current calibration come back together; the revision's and the
version's documents are parsed once per process (immutable rows, store/repositories/spec_cache.py)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy import event

from optimizer.spec.cluster_loading import load_cluster_preset
from service.jobs import submit
from store.db import Database
from store.errors import NotFoundError
from store.models import Job
from store.repositories import clusters as cluster_rows
from store.repositories.clusters import ClusterRepository
from store.repositories.spec_cache import SpecCache
from store.repositories.submissions import submission_rows
from store.repositories.workloads import workload_hash
from tests.factories import cluster_and_model, training_request


@contextmanager
def statements(db: Database) -> Iterator[list[str]]:
    seen: list[str] = []

    def note(_conn: Any, _cur: Any, statement: str, *_: Any) -> None:
        seen.append(statement.split(None, 1)[0].upper())

    event.listen(db.engine, "before_cursor_execute", note)
    try:
        yield seen
    finally:
        event.remove(db.engine, "before_cursor_execute", note)


def test_a_submission_reads_once_and_inserts_once(db: Database) -> None:
    with db.session() as s:
        cluster, model = cluster_and_model(s)
        submit(s, training_request(cluster, model))  # the workload row and the parsed specs now exist
    with statements(db) as seen, db.session() as s:
        job, created = submit(s, training_request(cluster, model))
    assert created and job.status == "queued"
    # was 8 (cluster, model, revision, version, workload, calibration, then the insert)
    assert [x for x in seen if x not in ("BEGIN", "COMMIT")] == ["SELECT", "INSERT"], seen


def test_submission_rows_name_the_revision_version_workload_and_calibration(db: Database) -> None:
    with db.session() as s:
        cluster, model = cluster_and_model(s)
        req = training_request(cluster, model)
        job, _ = submit(s, req)
        rows = submission_rows(s, cluster.id, model.id, None, None, workload_hash(req.workload))
        assert rows is not None
        assert rows.revision is not None and rows.revision.id == job.cluster_revision_id
        assert rows.version is not None and rows.version.id == job.model_version_id
        assert rows.workload is not None and rows.workload.id == job.workload_id
        assert rows.calibration_id is None  # none fitted
        assert submission_rows(s, cluster.id, model.id, 1, 1, "no such hash") is not None
        for args in ((cluster.id + 10_000, model.id, None, None), (cluster.id, model.id, 7, None)):
            assert submission_rows(s, *args, "x") is None  # the slow path names what is missing


def test_an_unknown_revision_is_still_a_404_naming_it(db: Database) -> None:
    with db.session() as s:
        cluster, model = cluster_and_model(s)
        with pytest.raises(NotFoundError, match="revision"):
            submit(s, training_request(cluster, model, cluster_revision=9))


def test_the_inventory_is_parsed_once_per_revision(db: Database) -> None:
    with db.session() as s:
        cluster, model = cluster_and_model(s)
    cache: SpecCache[Any] = cluster_rows._REVISIONS
    with db.session() as s:
        submit(s, training_request(cluster, model))
    misses = cache.misses
    for gbs in (64, 128):
        with db.session() as s:
            submit(s, training_request(cluster, model, gbs=gbs))
    assert cache.misses == misses
    with db.session() as s:  # a new revision is a new row: parsed anew, and the job names it
        ClusterRepository(s).record(cluster.id, load_cluster_preset("dgx-h100:2"), "grown")
    with db.session() as s:
        job, _ = submit(s, training_request(cluster, model))
        assert cache.misses == misses + 1
        assert s.get(Job, job.id) is not None and job.cluster_revision.number == 2


def test_spec_cache_keeps_its_weight_under_the_budget() -> None:
    cache = SpecCache[list[int]](budget=10, weight=len, entries=3)
    for k in range(5):
        assert cache.get(k, lambda: [0] * 4) == [0, 0, 0, 0]
    assert cache.get(4, lambda: [1]) == [0, 0, 0, 0]  # kept: the newest
    assert cache.get(0, lambda: [1]) == [1]  # evicted: two of weight 4 fit in 10
    assert cache.get("big", lambda: [2] * 11) == [2] * 11  # over the budget: not kept, nothing evicted for it
    assert cache.get(0, lambda: [3]) == [1]
