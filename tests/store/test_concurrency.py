"""Racing writers on real connections (committed, not rolled back): one job per key, no lost revision."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

from optimizer.spec.inventory import with_node_state
from service.catalog import create_cluster
from service.jobs import submit
from store.db import Database
from store.repositories.clusters import ClusterRepository
from store.repositories.jobs import JobRepository
from tests.factories import cluster_and_model, small_cluster, training_request, unique

T = TypeVar("T")


def race(n: int, fn: Callable[[int], T]) -> list[T]:
    """Run fn(0..n-1) in n threads released together; re-raise the first error."""
    barrier = threading.Barrier(n)
    results: list[T | None] = [None] * n
    errors: list[BaseException] = []

    def run(i: int) -> None:
        barrier.wait()
        try:
            results[i] = fn(i)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return [r for r in results if r is not None]


def test_two_writers_same_idempotency_key_create_one_job(db: Database) -> None:
    with db.session() as s:
        cluster, model = cluster_and_model(s)
    key = unique("key")

    def submit_once(_: int) -> int:
        with db.session() as s:
            job, _created = submit(s, training_request(cluster, model), client="racer", idempotency_key=key)
            return job.id

    for _round in range(3):
        ids = race(4, submit_once)
        assert len(set(ids)) == 1
    with db.session() as s:
        assert JobRepository(s).by_key("racer", key) is not None


def test_racing_inventory_updates_are_numbered_in_order_none_lost(db: Database) -> None:
    spec = small_cluster(8)
    with db.session() as s:
        cluster, _ = create_cluster(s, unique("c"), spec)
    nodes = [n.name for n in spec.pools[0].node_list]

    def fail_node(i: int) -> int:
        with db.session() as s:
            repo = ClusterRepository(s)
            c = repo.get(cluster.id, for_update=True)
            head = repo.head(c)
            assert head is not None
            from store.repositories.clusters import revision_spec

            new = with_node_state(revision_spec(c, head), nodes[i], "failed")
            rev, created = repo.record(cluster.id, new, f"fail {nodes[i]}")
            assert created
            return rev.number

    numbers = race(6, fail_node)
    assert sorted(numbers) == [2, 3, 4, 5, 6, 7]
    with db.session() as s:
        repo = ClusterRepository(s)
        c = repo.get(cluster.id)
        head = repo.head(c)
        assert c.head_revision == 7 and head is not None
        failed = {n for p in head.spec["pools"] for n in p.get("node_states", {})}
        assert failed == set(nodes[:6])  # every update survived: each read the one before it
