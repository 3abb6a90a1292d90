"""Clusters, models and GPU types in: documents validated before anything is stored."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from optimizer.errors import DomainError
from optimizer.spec.gpu_catalog import BUILTIN_GPUS
from service.catalog import cluster_from_document, create_cluster, set_node_state
from store.errors import ConflictError
from store.models import ClusterRevision
from store.repositories.gpu_types import GpuTypeRepository
from tests.factories import small_cluster, unique


def test_unknown_node_is_a_domain_error(session: Session) -> None:
    cluster, _ = create_cluster(session, unique("c"), small_cluster(1))
    with pytest.raises(DomainError, match="unknown node 'nope'"):
        set_node_state(session, cluster.id, "nope", "failed")


def test_invalid_spec_is_never_stored(session: Session) -> None:
    before = session.scalar(select(func.count()).select_from(ClusterRevision))
    with pytest.raises(DomainError) as err:
        cluster_from_document(
            session, "bad", {"pools": [{"name": "p", "gpu": "H100-SXM-80GB", "nodes": 0, "gpus_per_node": 8}]}
        )
    assert "nodes" in err.value.field
    assert session.scalar(select(func.count()).select_from(ClusterRevision)) == before


def test_user_gpu_type_is_usable_in_a_cluster(session: Session) -> None:
    base = BUILTIN_GPUS["H100-SXM-80GB"].model_dump(mode="json")
    name = unique("X100")
    GpuTypeRepository(session).create(type(BUILTIN_GPUS["H100-SXM-80GB"]).model_validate({**base, "name": name}))
    spec = cluster_from_document(session, "c", {"pools": [{"name": "p", "gpu": name, "nodes": 1, "gpus_per_node": 8}]})
    assert spec.gpu_of(spec.pools[0]).name == name
    with pytest.raises(ConflictError, match="built-in"):
        GpuTypeRepository(session).create(BUILTIN_GPUS["A100-SXM-80GB"])
