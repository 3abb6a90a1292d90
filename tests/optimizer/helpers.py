"""Configurations and clusters the optimizer tests share: the published recipes' parallel settings, the priced
two-pool cluster of the cost and serving tests, and the pools whose only healthy GPUs are in one pool."""

from __future__ import annotations

from typing import Any

from optimizer.spec.cluster_loading import build_cluster
from optimizer.spec.cluster_spec import ClusterSpec
from optimizer.spec.parallel_config import ParallelConfig


def megatron_interleaved(**fields: Any) -> ParallelConfig:
    """A Megatron-Bridge performance recipe's settings (scripts/performance, perf_recipes/*): the interleaved 1F1B
    schedule, sequence parallelism and the distributed optimizer (ZeRO 1), with the recipe's own degrees and knobs
    in `fields`."""
    return ParallelConfig(schedule="interleaved-1f1b", sequence_parallel=True, zero_stage=1, **fields)


def deepseek_v3_h100(**fields: Any) -> ParallelConfig:
    """NVIDIA's DeepSeek-V3 recipe for 1,024 H100 (Megatron-Bridge perf_recipes/deepseek/h100/deepseek_v3.py):
    tp 2, pp 8, vp 4, ep 64, etp 1, mbs 1 over dp 64, with the knobs a test sets in `fields`."""
    return megatron_interleaved(tp=2, pp=8, vp=4, dp=64, ep=64, etp=1, mbs=1, **fields)


def priced_pool(name: str, gpu: str, nodes: int, price_per_gpu_hour: float) -> dict[str, Any]:
    """One pool of 8-GPU nodes with a price per GPU-hour, as a cluster document lists it."""
    return {"name": name, "gpu": gpu, "nodes": nodes, "gpus_per_node": 8, "price_per_gpu_hour": price_per_gpu_hour}


def h100_a100_priced(name: str, h100_nodes: int) -> ClusterSpec:
    """H100 nodes at 2.5 and two A100 nodes at 1.2 per GPU-hour (the A100s are half the price), 8 GPUs a node."""
    pools = [priced_pool("h100", "H100-SXM-80GB", h100_nodes, 2.5), priced_pool("a100", "A100-SXM-80GB", 2, 1.2)]
    return build_cluster({"name": name, "pools": pools})


def live_and_failed_pools(down_gpu: str) -> list[dict[str, Any]]:
    """Two one-node pools of 8 GPUs as a cluster document lists them: 'live', healthy H100s, and 'down' (`down_gpu`),
    whose only node has failed."""
    return [
        {"name": "live", "gpu": "H100-SXM-80GB", "nodes": 1, "gpus_per_node": 8},
        {"name": "down", "gpu": down_gpu, "nodes": 1, "gpus_per_node": 8, "node_states": {"down-000": "failed"}},
    ]


def llama405b_h100_512(**fields: Any) -> ParallelConfig:
    """Llama 3.1 405B on 512 H100 as NVIDIA's DGX Cloud Benchmarking recipe runs it with NeMo 25.07.01
    (NVIDIA/dgxc-benchmarking llama3.1, v25.08.01 2fc17d4: tp 8, pp 8, cp 2, vp 8, mbs 1 over dp 4, global batch
    256, BF16 and FP8, through NeMo's scripts/performance/llm/pretrain_llama31_405b.py: TP-comm overlap)."""
    return megatron_interleaved(tp=8, pp=8, cp=2, vp=8, dp=4, mbs=1, tp_comm_overlap=True, **fields)
