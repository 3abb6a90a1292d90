"""Price one configuration of a stored model on a stored cluster (the API's `estimate`, as the CLI's)."""

from __future__ import annotations

from sqlalchemy.orm import Session

from optimizer.costmodel.estimate import estimate
from optimizer.costmodel.result import Estimate
from optimizer.errors import DomainError
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import InferenceWorkload, TrainingWorkload
from service.job_requests import target
from store.repositories.clusters import revision_spec
from store.repositories.models import version_spec


def estimate_config(
    s: Session,
    cluster_id: int,
    model_id: int,
    workload: TrainingWorkload | InferenceWorkload,
    config: ParallelConfig,
) -> Estimate:
    """The estimate of `config` for the cluster's current inventory and the model's current version; a serving
    workload with a rate or a concurrency also gets its TTFT/TPOT percentiles at that load. Reads only."""
    t = target(s, cluster_id, model_id)
    if t.revision is None:
        raise DomainError("cluster_id", f"cluster {t.cluster.id} has no inventory yet")
    if t.version is None:
        raise DomainError("model_id", f"model {t.model.id} has no version yet")
    return estimate(version_spec(t.model, t.version), revision_spec(t.cluster, t.revision), workload, config)
