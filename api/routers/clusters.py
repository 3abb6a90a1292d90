"""/v1/clusters: inventories with immutable revisions, node state changes, imports."""

from __future__ import annotations

import json
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
    KubernetesImport,
    NodePatch,
    PageOut,
    RevisionDiffOut,
    RevisionOut,
    SlurmImport,
    SyncRequest,
    SyncSourcePut,
)
from optimizer.errors import DomainError
from optimizer.spec.cluster_loading import cluster_document_from_topo
from optimizer.spec.inventory import diff_inventories
from optimizer.spec.yaml_documents import yaml_mapping
from service import scheduler_sync
from service.catalog import cluster_from_document, create_cluster, set_node_state
from service.replan import check_watches
from service.scheduler_sync import SyncOutcome
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


@router.post("/import/slurm", status_code=201, response_model=ClusterOut, responses=WRITE)
def import_slurm(s: SessionDep, _: Writer, name: NameQuery, body: SlurmImport) -> ClusterOut:
    """A cluster from `sinfo --json` output and a topology.conf: pools by GPU type, node states, switches."""
    cluster, _notes = scheduler_sync.import_slurm(s, name, json.dumps(body.nodes), body.topology, body.defaults)
    return cluster_out(s, cluster)


@router.post("/import/kubernetes", status_code=201, response_model=ClusterOut, responses=WRITE)
def import_kubernetes(s: SessionDep, _: Writer, name: NameQuery, body: KubernetesImport) -> ClusterOut:
    """A cluster from `kubectl get nodes -o json` output (GPU Feature Discovery and topology labels)."""
    cluster, _notes = scheduler_sync.import_kubernetes(s, name, json.dumps(body.nodes), body.labels, body.defaults)
    return cluster_out(s, cluster)


@router.post("/sync", status_code=201, response_model=ClusterOut, responses=WRITE)
def create_synced(s: SessionDep, cfg: SettingsDep, _: Writer, name: NameQuery, body: SyncSourcePut) -> ClusterOut:
    """A cluster whose inventory is read from a live scheduler now and at every sync (422 when it does not
    answer: there is nothing to keep)."""
    if body.source is None:
        raise DomainError("source", "name the scheduler to read (slurm or k8s)")
    outcome = scheduler_sync.create_synced_cluster(s, name, body.source, cfg=cfg)
    return cluster_out(s, ClusterRepository(s).get(outcome.cluster_id))


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


@router.put("/{cluster_id}/sync-source", response_model=ClusterOut, responses=WRITE)
def put_sync_source(cluster_id: RowId, body: SyncSourcePut, s: SessionDep, cfg: SettingsDep, _: Writer) -> ClusterOut:
    """Store (or clear) the scheduler the cluster's inventory is synced from; nothing is read now."""
    return cluster_out(s, scheduler_sync.set_sync_source(s, cluster_id, body.source, cfg))


@router.post("/{cluster_id}/sync", response_model=SyncOutcome, responses=WRITE)
def sync(cluster_id: RowId, s: SessionDep, cfg: SettingsDep, _: Writer, body: SyncRequest | None = None) -> SyncOutcome:
    """Read the cluster's scheduler now: a new revision with its diff when something changed (then the watches
    are checked as after a node change), none when nothing did. A scheduler that does not answer leaves the
    revision as it was: `status` unreachable, and `summary` says why."""
    body = body or SyncRequest()
    outcome = scheduler_sync.sync_cluster(s, cluster_id, body.source, cfg, body.replan)
    send_after_commit(s, outcome.replan_jobs)
    return outcome


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
