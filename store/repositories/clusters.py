"""Clusters and their immutable inventory revisions."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import and_, select

from optimizer.spec.cluster_spec import MAX_NODES_PER_CLUSTER, ClusterSpec
from optimizer.spec.inventory import InventoryDiff, content_hash, diff_inventories, spec_document
from store.errors import NotFoundError
from store.models import Cluster, ClusterRevision, now
from store.repositories.base import Repository, get_row, insert_unique, numbers_by_id
from store.repositories.paging import Page, PageRequest, paginate
from store.repositories.spec_cache import SpecCache


def revision_spec(cluster: Cluster, rev: ClusterRevision) -> ClusterSpec:
    """The inventory of a revision, named after its cluster."""
    return ClusterSpec.model_validate({**rev.spec, "name": cluster.name})


def listed_nodes(spec: ClusterSpec) -> int:
    return sum(len(p.nodes) if isinstance(p.nodes, list) else 0 for p in spec.pools)


# One inventory at the node cap: 56 MB parsed on this machine (100,000 listed nodes, tracemalloc), a few thousand
# small ones.
_REVISIONS = SpecCache[ClusterSpec](budget=MAX_NODES_PER_CLUSTER, weight=lambda c: 1 + listed_nodes(c))


def cached_revision_spec(cluster: Cluster, rev: ClusterRevision) -> ClusterSpec:
    """`revision_spec`, parsed once per process (store/repositories/spec_cache.py): the document is read (a
    deferred column) only on the first call. The copy is shared: a ClusterSpec is frozen."""
    return _REVISIONS.get((rev.id, cluster.name), lambda: revision_spec(cluster, rev))


@dataclass(frozen=True)
class ClusterListed:
    """A cluster as the list page shows it: its head revision's summary, not its inventory."""

    id: int
    name: str
    created_at: datetime
    revision: int
    healthy_gpus: int
    total_gpus: int
    gpu_types: list[str]


class ClusterRepository(Repository[Cluster]):
    row_type, kind = Cluster, "cluster"

    def create(self, name: str) -> Cluster:
        return insert_unique(self.s, Cluster(name=name, head_revision=0), "name", f"a cluster named {name!r} exists")

    def listing(self, limit: int) -> list[ClusterListed]:
        """The newest `limit` clusters with their head revision's summary columns: one query that reads no
        inventory (a cluster at the node cap has a document of megabytes) [issue 37 item 4]."""
        q = (
            select(
                Cluster.id,
                Cluster.name,
                Cluster.created_at,
                ClusterRevision.number,
                ClusterRevision.healthy_gpus,
                ClusterRevision.total_gpus,
                ClusterRevision.gpu_types,
            )
            .join(
                ClusterRevision,
                and_(ClusterRevision.cluster_id == Cluster.id, ClusterRevision.number == Cluster.head_revision),
            )
            .order_by(Cluster.created_at.desc(), Cluster.id.desc())  # as page(): newest first
            .limit(limit)
        )
        return [ClusterListed(*row) for row in self.s.execute(q)]

    def by_name(self, name: str) -> Cluster | None:
        return self.s.scalar(select(Cluster).where(Cluster.name == name))

    def all(self) -> list[Cluster]:
        return list(self.s.scalars(select(Cluster).order_by(Cluster.id)))

    def synced_ids(self) -> list[int]:
        """The clusters whose inventory is synced from a scheduler."""
        return list(self.s.scalars(select(Cluster.id).where(Cluster.sync_source.is_not(None)).order_by(Cluster.id)))

    def set_sync_source(self, cluster: Cluster, source: dict[str, Any] | None) -> None:
        """Store (or clear, None) the scheduler the cluster's inventory is synced from."""
        cluster.sync_source = source
        self.s.flush()

    def note_sync(self, cluster: Cluster, what: str) -> None:
        """Record what the last sync found (a new revision, no change, an unreachable scheduler)."""
        cluster.last_sync, cluster.last_synced_at = what[:256], now()
        self.s.flush()

    def head(self, cluster: Cluster) -> ClusterRevision | None:
        return self.revision(cluster, cluster.head_revision) if cluster.head_revision else None

    def revision(self, cluster: Cluster, number: int) -> ClusterRevision:
        row = self.s.scalar(
            select(ClusterRevision).where(ClusterRevision.cluster_id == cluster.id, ClusterRevision.number == number)
        )
        if row is None:
            raise NotFoundError("revision", number)
        return row

    def revision_by_id(self, revision_id: int) -> ClusterRevision:
        return get_row(self.s, ClusterRevision, revision_id, "revision")

    def numbers(self, revision_ids: set[int]) -> dict[int, int]:
        """Revision number by revision id: from this session when it holds the row, else one query."""
        return numbers_by_id(self.s, ClusterRevision, revision_ids)

    def revisions(self, cluster: Cluster, page: PageRequest) -> Page[ClusterRevision]:
        q = select(ClusterRevision).where(ClusterRevision.cluster_id == cluster.id)
        return paginate(self.s, q.order_by(ClusterRevision.number.desc()), page)

    def record(self, cluster_id: int, spec: ClusterSpec, cause: str) -> tuple[ClusterRevision, bool]:
        """Record `spec` as the cluster's inventory. Identical to the current one: no revision, (head, False).
        Otherwise a new revision numbered after the current one, with its diff: (revision, True). Racing writers
        are serialized on the cluster row, so revisions are numbered in commit order and none is lost."""
        cluster = self.get(cluster_id, for_update=True)  # serializes the revisions of one cluster
        self.s.refresh(cluster)
        doc = spec_document(spec)
        digest = content_hash(doc)
        head = self.head(cluster)
        if head is not None and head.content_hash == digest:
            return head, False
        diff: InventoryDiff | None = diff_inventories(revision_spec(cluster, head), spec) if head else None
        rev = ClusterRevision(
            cluster_id=cluster.id,
            number=cluster.head_revision + 1,
            spec=doc,
            content_hash=digest,
            healthy_gpus=spec.healthy_gpus,
            total_gpus=sum(p.gpus_per_node * p.node_count for p in spec.pools),
            gpu_types=list(dict.fromkeys(p.gpu for p in spec.pools)),
            cause=cause[:256],
            diff=diff.model_dump(mode="json") if diff else None,
        )
        self.s.add(rev)
        cluster.head_revision = rev.number
        self.s.flush()
        return rev, True
