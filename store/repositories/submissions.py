"""What a job submission reads before it writes, in one query: the cluster at its revision, the model at its
version, the workload row of the request's document (when stored before) and the cluster's current calibration
[issue 49: a submission read them in six round trips, each a wait for the database and for the GIL under load].
The revision's and the version's documents are not read: they are immutable, and a process keeps them parsed by
row id (store/repositories/spec_cache.py), reading a document only the first time."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import and_, select
from sqlalchemy.orm import Session, defer

from store.models import Calibration, Cluster, ClusterRevision, Model, ModelVersion, Workload


@dataclass(frozen=True)
class SubmissionRows:
    """The rows a submission names (None: the cluster has no inventory or the model no version yet, or the
    workload document is new)."""

    cluster: Cluster
    revision: ClusterRevision | None
    model: Model
    version: ModelVersion | None
    workload: Workload | None
    calibration_id: int | None
    """The cluster's newest calibration, None: none fitted yet."""


def submission_rows(
    s: Session,
    cluster_id: int,
    model_id: int,
    cluster_revision: int | None,
    model_version: int | None,
    workload_hash: str,
) -> SubmissionRows | None:
    """The rows of a submission in one query; None when the cluster or the model is unknown, or a revision or a
    version named is not there (the caller's slower path then names what is missing)."""
    calibration = (
        select(Calibration.id)
        .where(Calibration.cluster_id == Cluster.id)
        .order_by(Calibration.number.desc())
        .limit(1)
        .correlate(Cluster)
        .scalar_subquery()
    )
    rev_num = Cluster.head_revision if cluster_revision is None else cluster_revision
    version_num = Model.head_version if model_version is None else model_version
    q = (
        select(Cluster, ClusterRevision, Model, ModelVersion, Workload, calibration)
        .select_from(Cluster)
        .join(Model, Model.id == model_id)
        .outerjoin(ClusterRevision, and_(ClusterRevision.cluster_id == Cluster.id, ClusterRevision.number == rev_num))
        .outerjoin(ModelVersion, and_(ModelVersion.model_id == Model.id, ModelVersion.number == version_num))
        .outerjoin(Workload, Workload.content_hash == workload_hash)
        .where(Cluster.id == cluster_id)
        # documents of megabytes (a 100,000-node inventory) that the parsed copies stand in for
        .options(defer(ClusterRevision.spec), defer(ClusterRevision.diff), defer(ModelVersion.spec))
    )
    row = s.execute(q).one_or_none()
    if row is None:
        return None
    cluster, rev, model, version, workload, calibration_id = row
    if (cluster_revision is not None and rev is None) or (model_version is not None and version is None):
        return None
    return SubmissionRows(cluster, rev, model, version, workload, calibration_id)
