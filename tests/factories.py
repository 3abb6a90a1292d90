"""Specs and rows the store, service, API and worker tests share."""

from __future__ import annotations

import uuid

from sqlalchemy.orm import Session

from optimizer.spec.cluster_loading import load_cluster_preset
from optimizer.spec.cluster_spec import ClusterSpec
from optimizer.spec.model_loading import load_model_preset
from optimizer.spec.workload import TrainingWorkload
from service.catalog import create_cluster, create_model
from service.job_requests import JobRequest
from store.models import Cluster, Model, Watch
from store.repositories.watches import WatchRepository
from store.repositories.workloads import WorkloadRepository

# The solver benchmark's scenario (3) cluster with more pools: llama-2-70b (gbs 512, seq 4096) solves for seconds
# (four pools: about 3.5 s, first plan after 0.4 s) or tens of seconds (five pools: about 26 s, first plan after
# 1.5 s) on this project's 2-core machine, for tests that must catch a solve mid-way (cancel, worker kill). Scenario
# (3) itself solves in about 1 s since its bounds were tightened.
_A100_40GB = """  - {name: a100s, gpu: A100-SXM-40GB, nodes: 16, gpus_per_node: 8,
     intra_node: {kind: nvlink, gbytes_per_s: 300, domain_size: 8}, inter_node: {nics_per_node: 4, gbits_per_s: 200}}
"""
_H200 = """  - {name: h200, gpu: H200-SXM-141GB, nodes: 8, gpus_per_node: 8,
     intra_node: {kind: nvlink, gbytes_per_s: 450, domain_size: 8}, inter_node: {nics_per_node: 8, gbits_per_s: 400}}
"""


def hetero_yaml(pools: int = 3) -> str:
    """The heterogeneous cluster as YAML: scenario (3)'s H100 + A100 + L40S, then A100-40GB, then H200."""
    from benchmarks.solver import HETERO

    if not 3 <= pools <= 5:
        raise ValueError("pools: 3, 4 or 5")
    return HETERO + "".join((_A100_40GB, _H200)[: pools - 3])


def hetero_cluster(pools: int = 3) -> ClusterSpec:
    """The heterogeneous cluster (see hetero_yaml)."""
    from optimizer.spec.cluster_loading import load_cluster_yaml

    return load_cluster_yaml(hetero_yaml(pools))


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def long_training_request(s: Session) -> tuple[Cluster, JobRequest]:
    """A job whose search runs for tens of seconds (Llama 2 70B over five heterogeneous pools, 120 s limit): for
    tests that stop a running solver."""
    cluster, _ = create_cluster(s, unique("hetero"), hetero_cluster(pools=5))
    _, model_v = create_model(s, unique("m"), load_model_preset("llama-2-70b"))
    req = JobRequest.model_validate(
        {
            "cluster_id": cluster.id,
            "model_id": model_v.model_id,
            "workload": TrainingWorkload(global_batch_size=512, seq_len=4096).model_dump(),
            "time_limit_s": 120,
        }
    )
    return cluster, req


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
