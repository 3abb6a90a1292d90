"""Every invalid combination names the field and the rule."""

from __future__ import annotations

import pytest

from optimizer.costmodel.estimate import estimate
from optimizer.errors import DomainError
from optimizer.spec.cluster_loading import load_cluster_preset, load_cluster_yaml
from optimizer.spec.cluster_spec import ClusterSpec
from optimizer.spec.model_loading import load_model_preset
from optimizer.spec.model_spec import ModelSpec
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import InferenceWorkload, TrainingWorkload

W = TrainingWorkload(global_batch_size=64, seq_len=4096)


def err(model: ModelSpec, cluster: ClusterSpec, cfg: ParallelConfig, w: TrainingWorkload = W) -> DomainError:
    with pytest.raises(DomainError) as exc:
        estimate(model, cluster, w, cfg)
    return exc.value


def test_tp_heads(llama70b: ModelSpec, two_dgx_h100: ClusterSpec) -> None:
    e = err(llama70b, two_dgx_h100, ParallelConfig(tp=3))
    assert e.field == "config.tp" and str(e) == "config.tp: tp=3 does not divide num_attention_heads=64"


def test_tp_kv_heads(llama70b: ModelSpec, two_dgx_h100: ClusterSpec) -> None:
    e = err(llama70b, two_dgx_h100, ParallelConfig(tp=16))
    assert "num_kv_heads=8" in str(e)


def test_layers_per_stage(llama70b: ModelSpec, two_dgx_h100: ClusterSpec) -> None:
    e = err(llama70b, two_dgx_h100, ParallelConfig(tp=8, pp=2, layers_per_stage=[40, 41]))
    assert e.field == "config.layers_per_stage" and "81" in e.rule
    # pp that does not divide the layers: the framework's layout split, embedding and loss counted as layers
    # (Megatron --pipeline-model-parallel-layout; torchtitan first/last_stage_less_layers = 1).
    est = estimate(llama70b, two_dgx_h100, W, ParallelConfig(tp=4, pp=3))
    assert [s.layers for s in est.stages] == [26, 28, 26]


def test_batch_identity(llama70b: ModelSpec, two_dgx_h100: ClusterSpec) -> None:
    e = err(llama70b, two_dgx_h100, ParallelConfig(tp=8, dp=2, mbs=3))
    assert e.field == "config.mbs" and "dp x mbs" in e.rule


def test_interleaved_rules(llama70b: ModelSpec, two_dgx_h100: ClusterSpec) -> None:
    assert err(llama70b, two_dgx_h100, ParallelConfig(tp=8, pp=2, vp=2)).field == "config.vp"
    # Megatron's layout runs virtual stages of unequal size: 40 layers per rank over vp=3 chunks of 13, 13, 14.
    est = estimate(llama70b, two_dgx_h100, W, ParallelConfig(tp=8, pp=2, vp=3, schedule="interleaved-1f1b"))
    assert [s.layers for s in est.stages] == [40, 40]
    w = TrainingWorkload(global_batch_size=3, seq_len=4096)
    e = err(llama70b, two_dgx_h100, ParallelConfig(tp=8, pp=2, vp=2, schedule="interleaved-1f1b"), w)
    assert e.field == "config.schedule"


def test_ep_needs_moe(llama70b: ModelSpec, two_dgx_h100: ClusterSpec) -> None:
    assert "dense" in err(llama70b, two_dgx_h100, ParallelConfig(tp=8, dp=2, ep=2)).rule
    mixtral = load_model_preset("mixtral-8x7b")
    assert "num_experts=8" in err(mixtral, two_dgx_h100, ParallelConfig(tp=1, dp=16, ep=16)).rule


def test_too_many_gpus(llama70b: ModelSpec, two_dgx_h100: ClusterSpec) -> None:
    e = err(llama70b, two_dgx_h100, ParallelConfig(tp=8, pp=4))
    assert "32 GPUs needed" in e.rule and "16 healthy" in e.rule


def test_sp_and_zero_rules(llama70b: ModelSpec, two_dgx_h100: ClusterSpec) -> None:
    assert err(llama70b, two_dgx_h100, ParallelConfig(sequence_parallel=True)).field == "config.sequence_parallel"
    assert err(llama70b, two_dgx_h100, ParallelConfig(tp=8, pp=2, zero_stage=3)).field == "config.zero_stage"


def test_fp8_needs_hardware(llama70b: ModelSpec) -> None:
    a100 = load_cluster_preset("dgx-a100:2")
    w = TrainingWorkload(global_batch_size=64, seq_len=4096, precision="fp8")
    e = err(llama70b, a100, ParallelConfig(tp=8, pp=2), w)
    assert e.field == "workload.precision" and "A100" in e.rule


def test_no_healthy_gpu(llama70b: ModelSpec) -> None:
    c = load_cluster_yaml(
        "name: x\npools:\n  - {name: p, gpu: H100, nodes: 1, gpus_per_node: 8, node_states: {p-000: failed}}\n"
    )
    assert "no healthy GPU" in err(llama70b, c, ParallelConfig(tp=8)).rule


def test_unknown_stage_pool(llama70b: ModelSpec, two_dgx_h100: ClusterSpec) -> None:
    e = err(llama70b, two_dgx_h100, ParallelConfig(tp=8, pp=2, stage_pools=["dgx-h100", "nope"]))
    assert "known: dgx-h100" in e.rule


def test_inference_kv_heads_replication(llama70b: ModelSpec) -> None:
    c = load_cluster_preset("dgx-h100:2")
    est = estimate(llama70b, c, InferenceWorkload(prompt_len=128, output_len=16), ParallelConfig(tp=16))
    assert est.feasible  # serving engines replicate KV heads when tp > n_kv
