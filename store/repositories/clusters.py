"""Clusters and their immutable inventory revisions."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from optimizer.spec.cluster_spec import ClusterSpec
from optimizer.spec.inventory import InventoryDiff, content_hash, diff_inventories, spec_document
from store.errors import NotFoundError
from store.models import Cluster, ClusterRevision
from store.repositories.base import insert_unique, numbers_by_id
from store.repositories.paging import Page, PageRequest, paginate


def revision_spec(cluster: Cluster, rev: ClusterRevision) -> ClusterSpec:
    """The inventory of a revision, named after its cluster."""
    return ClusterSpec.model_validate({**rev.spec, "name": cluster.name})


class ClusterRepository:
    def __init__(self, session: Session) -> None:
        self.s = session

    def create(self, name: str) -> Cluster:
        return insert_unique(self.s, Cluster(name=name, head_revision=0), "name", f"a cluster named {name!r} exists")

    def get(self, cluster_id: int, *, for_update: bool = False) -> Cluster:
        q = select(Cluster).where(Cluster.id == cluster_id)
        if for_update:  # serializes revisions of one cluster (PostgreSQL row lock; SQLite writers queue at BEGIN)
            q = q.with_for_update()
        row = self.s.scalar(q)
        if row is None:
            raise NotFoundError("cluster", cluster_id)
        return row

    def by_name(self, name: str) -> Cluster | None:
        return self.s.scalar(select(Cluster).where(Cluster.name == name))

    def page(self, page: PageRequest) -> Page[Cluster]:
        return paginate(self.s, select(Cluster).order_by(Cluster.created_at.desc(), Cluster.id.desc()), page)

    def all(self) -> list[Cluster]:
        return list(self.s.scalars(select(Cluster).order_by(Cluster.id)))

    def delete(self, cluster_id: int) -> None:
        self.s.delete(self.get(cluster_id))
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
        row = self.s.get(ClusterRevision, revision_id)
        if row is None:
            raise NotFoundError("revision", revision_id)
        return row

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
        cluster = self.get(cluster_id, for_update=True)
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
            cause=cause[:256],
            diff=diff.model_dump(mode="json") if diff else None,
        )
        self.s.add(rev)
        cluster.head_revision = rev.number
        self.s.flush()
        return rev, True
