"""Specs and rows the store tests share."""

from __future__ import annotations

import uuid

from sqlalchemy.orm import Session

from optimizer.cluster_loading import load_cluster_preset
from optimizer.cluster_spec import ClusterSpec
from optimizer.model_loading import load_model_preset
from optimizer.workload import TrainingWorkload
from store.models import Cluster, Model, Watch
from store.repositories.watches import WatchRepository
from store.repositories.workloads import WorkloadRepository
from store.services.catalog import create_cluster, create_model
from store.services.jobs import JobRequest


def hetero_cluster() -> ClusterSpec:
    """The solver benchmark's scenario (3): H100 + A100 + L40S pools, a solve that runs to its time limit."""
    from benchmarks.solver import HETERO
    from optimizer.cluster_loading import load_cluster_yaml

    return load_cluster_yaml(HETERO)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def small_cluster(nodes: int = 2) -> ClusterSpec:
    return load_cluster_preset(f"dgx-h100:{nodes}")


def cluster_and_model(s: Session, nodes: int = 1, model: str = "llama-3-8b") -> tuple[Cluster, Model]:
    cluster, _ = create_cluster(s, unique("c"), small_cluster(nodes))
    m, _ = create_model(s, unique("m"), load_model_preset(model))
    return cluster, m


def training_request(cluster: Cluster, model: Model, gbs: int = 64, **kw: object) -> JobRequest:
    return JobRequest.model_validate(
        {
            "cluster_id": cluster.id,
            "model_id": model.id,
            "workload": TrainingWorkload(global_batch_size=gbs, seq_len=4096).model_dump(),
            "time_limit_s": 20,
            **kw,
        }
    )


def training_watch(s: Session, cluster: Cluster, model: Model, name: str | None = None) -> Watch:
    """A watch re-planning `model` on `cluster` (gbs 64, seq 4096, step time, 20 s)."""
    w = WorkloadRepository(s).intern(TrainingWorkload(global_batch_size=64, seq_len=4096))
    return WatchRepository(s).create(
        Watch(
            name=name or unique("w"),
            cluster_id=cluster.id,
            model_id=model.id,
            workload_id=w.id,
            search={},
            objective="step_time_s",
            time_limit_s=20,
        )
    )
