"""/v1/clusters: inventories with immutable revisions, node state changes, imports."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Query

from api.convert import cluster_out, page_out, revision_out
from api.deps import NameQuery, Paging, Reader, RowId, SessionDep, SettingsDep, Writer, send_after_commit
from api.responses import NOT_FOUND, STANDARD, WRITE
from api.routers.rows import add_list_get_delete
from api.schemas import (
    ClusterCreate,
    ClusterOut,
    InventoryPut,
    InventoryResult,
    NodePatch,
    PageOut,
    RevisionDiffOut,
    RevisionOut,
)
from optimizer.errors import DomainError
from optimizer.spec.cluster_loading import cluster_document_from_topo
from optimizer.spec.inventory import diff_inventories
from optimizer.spec.yaml_documents import yaml_mapping
from service.catalog import cluster_from_document, create_cluster, set_node_state
from service.replan import check_watches
from store.models import MAX_ID
from store.repositories.clusters import ClusterRepository, revision_spec

router = APIRouter(prefix="/v1/clusters", tags=["clusters"], responses=STANDARD)
ClusterYaml = Annotated[str, Body(media_type="application/yaml", description="The cluster YAML format.")]
AgainstRevision = Annotated[
    int | None, Query(ge=1, le=MAX_ID, description="Revision to compare with; default the one before.")
]


@router.post("", status_code=201, response_model=ClusterOut, responses=WRITE)
def create(body: ClusterCreate, s: SessionDep, _: Writer) -> ClusterOut:
    return _create(s, body.name, body.inventory, "created")


@router.post("/import/yaml", status_code=201, response_model=ClusterOut, responses=WRITE)
def import_yaml(s: SessionDep, _: Writer, name: NameQuery, body: ClusterYaml) -> ClusterOut:
    return _create(s, name, yaml_mapping(body, "body", "the body", "with `pools`"), "imported from YAML")


@router.post("/import/nvidia-smi-topo", status_code=201, response_model=ClusterOut, responses=WRITE)
def import_topo(
    s: SessionDep,
    _: Writer,
    name: NameQuery,
    gpu: Annotated[str, Query(min_length=1, max_length=64, description="GPU type of the node.")],
    body: Annotated[str, Body(media_type="text/plain", description="Output of `nvidia-smi topo -m`.")],
    nodes: Annotated[int, Query(ge=1, le=100_000)] = 1,
    nic_gbps: Annotated[float, Query(gt=0, le=100_000)] = 400.0,
) -> ClusterOut:
    doc = cluster_document_from_topo(body, gpu, nodes, nic_gbps, "pool")
    return _create(s, name, doc, "imported from nvidia-smi topo -m")


def _create(s: SessionDep, name: str, document: dict[str, Any], cause: str) -> ClusterOut:
    """A new cluster from an inventory document (a `name` in it gives way to `name`)."""
    cluster, _rev = create_cluster(s, name, cluster_from_document(s, name, document), cause)
    return cluster_out(s, cluster)


add_list_get_delete(router, ClusterRepository, cluster_out, ClusterOut, "clusters", "cluster_id")


def _replan(s: SessionDep, cfg: SettingsDep, cluster_id: int) -> list[int]:
    """With replan_on_inventory_change, the cluster's watches are checked at once (sent after the commit)."""
    if not cfg.replan_on_inventory_change:
        return []
    jobs = [c.job_id for c in check_watches(s, "inventory_change", cluster_id, cfg) if c.job_id is not None]
    send_after_commit(s, jobs)
    return jobs


@router.put("/{cluster_id}/inventory", response_model=InventoryResult, responses=WRITE)
def put_inventory(cluster_id: RowId, body: InventoryPut, s: SessionDep, cfg: SettingsDep, _: Writer) -> InventoryResult:
    repo = ClusterRepository(s)
    cluster = repo.get(cluster_id)
    spec = cluster_from_document(s, cluster.name, body.inventory)
    rev, created = repo.record(cluster_id, spec, body.cause)
    return InventoryResult(
        created=created, revision=revision_out(rev), replan_jobs=_replan(s, cfg, cluster_id) if created else []
    )


@router.patch("/{cluster_id}/nodes/{node}", response_model=InventoryResult, responses=WRITE)
def patch_node(
    cluster_id: RowId, node: str, body: NodePatch, s: SessionDep, cfg: SettingsDep, _: Writer
) -> InventoryResult:
    rev, created = set_node_state(s, cluster_id, node, body.state)
    return InventoryResult(
        created=created, revision=revision_out(rev), replan_jobs=_replan(s, cfg, cluster_id) if created else []
    )


@router.get("/{cluster_id}/revisions", response_model=PageOut[RevisionOut], responses=NOT_FOUND)
def revisions(cluster_id: RowId, s: SessionDep, _: Reader, page: Paging) -> PageOut[RevisionOut]:
    repo = ClusterRepository(s)
    p = repo.revisions(repo.get(cluster_id), page)
    return page_out(p, [revision_out(r) for r in p.items])


@router.get("/{cluster_id}/revisions/{number}", response_model=RevisionOut, responses=NOT_FOUND)
def revision(cluster_id: RowId, number: RowId, s: SessionDep, _: Reader) -> RevisionOut:
    repo = ClusterRepository(s)
    return revision_out(repo.revision(repo.get(cluster_id), number))


@router.get("/{cluster_id}/revisions/{number}/diff", response_model=RevisionDiffOut, responses=NOT_FOUND)
def revision_diff(
    cluster_id: RowId, number: RowId, s: SessionDep, _: Reader, against: AgainstRevision = None
) -> RevisionDiffOut:
    repo = ClusterRepository(s)
    cluster = repo.get(cluster_id)
    after = repo.revision(cluster, number)
    base = against if against is not None else number - 1
    if base < 1:
        raise DomainError("against", "revision 1 has no revision before it; name one with ?against=N")
    before = repo.revision(cluster, base)
    d = diff_inventories(revision_spec(cluster, before), revision_spec(cluster, after))
    return RevisionDiffOut(before=before.number, after=after.number, diff=d, summary=d.summary())
