"""Clusters, models and GPU types: validated specs in, versioned rows out."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError
from sqlalchemy.orm import Session

from optimizer.errors import DomainError
from optimizer.spec.cluster_loading import build_cluster
from optimizer.spec.cluster_spec import ClusterSpec, NodeState
from optimizer.spec.gpu_catalog import GPUSpec
from optimizer.spec.inventory import with_node_state
from optimizer.spec.model_loading import build_model
from optimizer.spec.model_spec import ModelSpec
from optimizer.spec.validation_errors import domain_error_from_validation
from store.models import Cluster, ClusterRevision, Model, ModelVersion
from store.repositories.clusters import ClusterRepository, revision_spec
from store.repositories.gpu_types import GpuTypeRepository
from store.repositories.models import ModelRepository


def cluster_from_document(session: Session, name: str, document: dict[str, Any]) -> ClusterSpec:
    """Validate an inventory document; pools may use the user-defined GPU types stored in the database.

    The document is a client's JSON: any field may have any type, so the stored-type lookup reads only what has
    the expected shape and leaves every other shape to the spec's validation (a 422 naming the field).
    """
    doc = {**document, "name": name}
    pools, gpu_types = doc.get("pools"), doc.get("gpu_types", [])
    used = {p.get("gpu") for p in _mappings(pools)} if isinstance(pools, list) else set()
    inline = {g.get("name") for g in _mappings(gpu_types)} if isinstance(gpu_types, list) else set()
    wanted = {u for u in used if isinstance(u, str) and u and u not in inline}
    stored = GpuTypeRepository(session).specs(wanted) if wanted and isinstance(gpu_types, list) else {}
    if stored:
        doc["gpu_types"] = [*gpu_types, *(g.model_dump(mode="json") for g in stored.values())]
    return build_cluster(doc)


def _mappings(items: list[Any]) -> list[dict[str, Any]]:
    """The mappings among `items` whose `gpu` / `name` keys can be looked up (strings; other types left to the
    spec's validation)."""
    return [{k: v for k, v in item.items() if isinstance(v, str)} for item in items if isinstance(item, dict)]


def create_cluster(
    session: Session, name: str, spec: ClusterSpec, cause: str = "created"
) -> tuple[Cluster, ClusterRevision]:
    repo = ClusterRepository(session)
    cluster = repo.create(name)
    rev, _ = repo.record(cluster.id, spec, cause)
    return cluster, rev


def set_node_state(session: Session, cluster_id: int, node: str, state: NodeState) -> tuple[ClusterRevision, bool]:
    """Drain, fail or restore one node: a new revision when the state changes."""
    repo = ClusterRepository(session)
    cluster = repo.get(cluster_id, for_update=True)
    head = repo.head(cluster)
    if head is None:
        raise DomainError("cluster", f"cluster {cluster_id} has no inventory")
    spec = with_node_state(revision_spec(cluster, head), node, state)
    return repo.record(cluster.id, spec, f"node {node} {state}")


def model_from_document(name: str, document: dict[str, Any]) -> ModelSpec:
    return build_model({**document, "name": name})


def create_model(session: Session, name: str, spec: ModelSpec) -> tuple[Model, ModelVersion]:
    repo = ModelRepository(session)
    model = repo.create(name)
    version, _ = repo.record(model.id, spec)
    return model, version


def gpu_from_document(document: dict[str, Any]) -> GPUSpec:
    try:
        return GPUSpec.model_validate(document)
    except ValidationError as exc:
        raise domain_error_from_validation(exc, "gpu_type") from exc
