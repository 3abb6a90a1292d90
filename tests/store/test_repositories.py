"""Repositories against real SQLite and PostgreSQL, each test rolled back."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from optimizer.errors import DomainError
from optimizer.spec.inventory import with_node_state
from optimizer.spec.workload import InferenceWorkload, TrainingWorkload
from service.catalog import create_cluster, set_node_state
from service.jobs import submit
from store.errors import ConflictError, NotFoundError
from store.models import Cluster, Job, Model
from store.repositories.clusters import ClusterRepository
from store.repositories.jobs import JobRepository
from store.repositories.models import ModelRepository
from store.repositories.paging import PageRequest
from store.repositories.tokens import TokenRepository, hash_token
from store.repositories.workloads import WorkloadRepository
from tests.factories import cluster_and_model, small_cluster, training_request, unique


def test_identical_inventory_creates_no_revision(session: Session) -> None:
    cluster, rev = create_cluster(session, unique("c"), small_cluster(2))
    repo = ClusterRepository(session)
    again, created = repo.record(cluster.id, small_cluster(2), "same")
    assert (again.id, created) == (rev.id, False)
    assert cluster.head_revision == 1


def test_revision_diff_names_nodes_and_gpus(session: Session) -> None:
    spec = small_cluster(4)
    cluster, _ = create_cluster(session, unique("c"), spec)
    repo = ClusterRepository(session)
    nodes = [n.name for n in spec.pools[0].node_list]
    changed = with_node_state(with_node_state(spec, nodes[0], "drained"), nodes[1], "failed")
    rev2, created = repo.record(cluster.id, changed, "maintenance")
    assert created and rev2.number == 2
    assert rev2.diff is not None
    assert rev2.diff["drained"] == [nodes[0]] and rev2.diff["failed"] == [nodes[1]]
    assert rev2.diff["pools"][0]["delta"] == -16
    assert rev2.healthy_gpus == 16 and rev2.total_gpus == 32
    rev3, _ = set_node_state(session, cluster.id, nodes[0], "healthy")
    assert rev3.number == 3 and rev3.diff is not None and rev3.diff["restored"] == [nodes[0]]
    grown = small_cluster(5)
    rev4, _ = repo.record(cluster.id, grown, "new node")
    assert rev4.diff is not None and rev4.diff["added"] == [grown.pools[0].node_list[-1].name]
    history = repo.revisions(cluster, PageRequest(limit=2))
    assert [r.number for r in history.items] == [4, 3] and history.total == 4


def test_name_clash_is_a_conflict_not_a_driver_error(session: Session) -> None:
    name = unique("c")
    create_cluster(session, name, small_cluster(1))
    with pytest.raises(ConflictError) as err:
        create_cluster(session, name, small_cluster(1))
    assert err.value.field == "name"
    assert session.scalar(select(func.count()).select_from(Cluster).where(Cluster.name == name)) == 1


def test_model_versions(session: Session) -> None:
    _, model = cluster_and_model(session)
    repo = ModelRepository(session)
    head = repo.head(model)
    assert head is not None and head.number == 1 and head.parameters > 7e9
    from optimizer.spec.model_loading import load_model_preset

    same, created = repo.record(model.id, load_model_preset("llama-3-8b"))
    assert not created and same.id == head.id
    v2, created = repo.record(model.id, load_model_preset("llama-3-8b").model_copy(update={"num_layers": 40}))
    assert created and v2.number == 2 and v2.num_layers == 40
    with pytest.raises(NotFoundError):
        repo.get(10**9)


def test_workload_documents_are_stored_once(session: Session) -> None:
    repo = WorkloadRepository(session)
    a = repo.intern(TrainingWorkload(global_batch_size=8, seq_len=2048))
    b = repo.intern(TrainingWorkload(global_batch_size=8, seq_len=2048))
    c = repo.intern(InferenceWorkload(prompt_len=8, output_len=8))
    assert a.id == b.id != c.id and c.mode == "inference"


def test_lists_are_newest_first_and_paginated(session: Session) -> None:
    names = [unique("m") for _ in range(5)]
    for n in names:
        ModelRepository(session).create(n)
    page = ModelRepository(session).page(PageRequest(offset=0, limit=3))
    assert [m.name for m in page.items] == names[::-1][:3]
    assert page.total >= 5
    page2 = ModelRepository(session).page(PageRequest(offset=3, limit=3))
    assert [m.name for m in page2.items][:2] == names[::-1][3:5]
    with pytest.raises(DomainError, match="limit"):
        PageRequest(limit=0)


def test_jobs_filter_by_status_and_cancel(session: Session) -> None:
    cluster, model = cluster_and_model(session)
    job, _ = submit(session, training_request(cluster, model))
    repo = JobRepository(session)
    assert job.id in [j.id for j in repo.page(PageRequest(), status="queued", cluster_id=cluster.id).items]
    repo.request_cancel(job.id)
    assert job.status == "cancelled" and not repo.claim(job.id)
    with pytest.raises(ConflictError, match="cancelled"):
        repo.request_cancel(job.id)


def test_tokens_are_stored_hashed(session: Session) -> None:
    repo = TokenRepository(session)
    row, secret = repo.create("ci", ["write"])
    assert row.token_hash == hash_token(secret) and secret not in row.token_hash
    assert row.scopes == "read,write"
    found = repo.authenticate(secret)
    assert found is not None and found.id == row.id
    assert repo.authenticate(secret + "x") is None
    repo.revoke(row.id)
    assert repo.authenticate(secret) is None
    with pytest.raises(DomainError, match="scope"):
        repo.create("bad", ["admin"])


def test_models_table_has_real_columns_for_filters(session: Session) -> None:
    assert {"status", "created_at", "cluster_id", "model_id"} <= set(Job.__table__.columns.keys())
    assert Model.__table__.c.name.unique
