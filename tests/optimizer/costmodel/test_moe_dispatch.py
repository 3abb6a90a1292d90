"""MoE dispatch and host launches: hierarchical dispatch (DeepEP / HybridEP) sends a token once per destination node
over the network, group-limited routing caps the nodes, eager MoE layers pay the host's launch time the GPU does
not cover, and full-iteration CUDA graphs remove it. Every knob reaches the exports and refuses what cannot run."""

from __future__ import annotations

import json
from importlib import resources

import pytest
from pydantic import ValidationError

from optimizer.costmodel.ep_dispatch import deepep_network_share, remote_nodes_per_token
from optimizer.costmodel.estimate import estimate
from optimizer.errors import DomainError
from optimizer.exports.launch import export
from optimizer.search.planner import plan
from optimizer.search.space import SearchSpace, parse_pins
from optimizer.spec.cluster_loading import resolve_cluster
from optimizer.spec.model_loading import model_from_hf_config, resolve_model
from optimizer.spec.model_spec import MoESpec
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import InferenceWorkload, TrainingWorkload

Q30 = resolve_model("qwen3-30b-a3b")
DSV3 = resolve_model("deepseek-v3")
DSV3_HF = json.loads((resources.files("optimizer.spec") / "presets" / "models" / "deepseek-v3.json").read_text())


def _w(cuda_graphs: str | None = None, framework: str = "megatron") -> TrainingWorkload:
    return TrainingWorkload(
        global_batch_size=256,
        seq_len=4096,
        precision="fp8",
        grad_dtype="bf16",
        fp8_param_gather=framework == "megatron",
        cuda_graphs=cuda_graphs,  # type: ignore[arg-type]
        framework=framework,  # type: ignore[arg-type]
    )


def test_node_copies_follow_the_routing() -> None:
    assert DSV3.moe is not None and Q30.moe is not None
    assert (DSV3.moe.num_groups, DSV3.moe.group_topk) == (8, 4)  # HF n_group / topk_group
    # DeepSeek-V3 over 8 nodes: 4 of 8 groups (nodes) per token, 3.5 of them remote on average: half the copies.
    assert remote_nodes_per_token(DSV3.moe, 8) == pytest.approx(3.5)
    assert deepep_network_share(DSV3.moe, 8) == pytest.approx(0.5)
    # Qwen3-30B over 2 nodes, unrestricted: 8 picks of 128 experts almost surely reach the other node once.
    assert deepep_network_share(Q30.moe, 2) == pytest.approx(0.25, abs=0.01)
    assert deepep_network_share(Q30.moe, 1) == 1.0


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"num_groups": 8}, "moe.num_groups"),
        ({"num_groups": 8, "group_topk": 9}, "moe.group_topk"),
        ({"num_groups": 7, "group_topk": 2}, "moe.num_groups"),
    ],
)
def test_group_limited_routing_is_validated(fields: dict[str, int], field: str) -> None:
    with pytest.raises(ValidationError, match=field):
        MoESpec(num_experts=256, top_k=8, expert_ffn_hidden_size=2048, **fields)
    cfg = {**DSV3_HF, "n_group": fields["num_groups"], "topk_group": fields.get("group_topk")}
    with pytest.raises(DomainError) as err:  # a config.json gets the rule with the field named
        model_from_hf_config(cfg)
    assert field in f"{err.value.field}: {err.value.rule}"


def test_hierarchical_dispatch_saves_only_across_nodes() -> None:
    two_nodes = resolve_cluster("dgx-h100:2")
    cfg = ParallelConfig(tp=1, dp=16, ep=16, mbs=1, zero_stage=1)
    a2a = estimate(Q30, two_nodes, _w("full_iteration"), cfg)
    deep = estimate(Q30, two_nodes, _w("full_iteration"), cfg.model_copy(update={"ep_dispatch": "deepep"}))
    assert deep.breakdown.ep_comm < 0.5 * a2a.breakdown.ep_comm
    one_node = resolve_cluster("dgx-h100:1")
    cfg8 = ParallelConfig(tp=1, dp=8, ep=8, mbs=1, zero_stage=1)
    same = estimate(Q30, one_node, _w("full_iteration"), cfg8.model_copy(update={"ep_dispatch": "deepep"}))
    assert same.step_time_s == estimate(Q30, one_node, _w("full_iteration"), cfg8).step_time_s


def test_eager_moe_layers_pay_the_host_and_full_iteration_graphs_do_not() -> None:
    cluster = resolve_cluster("dgx-h100:1")
    cfg = ParallelConfig(tp=1, dp=8, ep=8, mbs=1, zero_stage=1)
    eager, graphed = estimate(Q30, cluster, _w(), cfg), estimate(Q30, cluster, _w("full_iteration"), cfg)
    assert eager.breakdown.launch > 0 and graphed.breakdown.launch == 0
    assert any("MoE layers run eagerly" in n for n in eager.notes)
    assert not any("MoE layers run eagerly" in n for n in graphed.notes)
    assert eager.step_time_s > graphed.step_time_s + 0.9 * eager.breakdown.launch
    assert estimate(Q30, cluster, _w("layers"), cfg).breakdown.launch == eager.breakdown.launch  # experts eager
    # DeepSeek-V3's experts keep the GPU busier than the host needs: nothing exposed.
    ds = estimate(DSV3, resolve_cluster("dgx-h100:32"), _w(), ParallelConfig(pp=8, dp=32, ep=32, mbs=1, zero_stage=1))
    assert ds.breakdown.launch == 0
    # Dense models have no MoE layer to launch.
    llama = resolve_model("llama-3-8b")
    assert estimate(llama, cluster, _w(), ParallelConfig(dp=8, zero_stage=1)).breakdown.launch == 0


def test_dispatch_rules() -> None:
    cluster = resolve_cluster("dgx-h100:2")
    with pytest.raises(DomainError) as err:
        estimate(Q30, cluster, _w(), ParallelConfig(dp=16, ep_dispatch="deepep", zero_stage=1))
    assert err.value.field == "config.ep_dispatch" and "ep > 1" in err.value.rule
    cfg = ParallelConfig(dp=16, ep=16, ep_dispatch="deepep", zero_stage=1)
    with pytest.raises(DomainError) as err:
        estimate(Q30, cluster, _w(framework="deepspeed"), cfg)
    assert err.value.field == "config.ep_dispatch" and "deepspeed" in err.value.rule
    assert parse_pins(["ep_dispatch=deepep"])["ep_dispatch"].values == ("deepep",)
    serving = InferenceWorkload(prompt_len=1024, output_len=128, batch=8)
    with pytest.raises(DomainError) as err:
        plan(Q30, cluster, serving, SearchSpace(pins=parse_pins(["ep_dispatch=deepep"])), time_limit_s=5)
    assert err.value.field == "pin.ep_dispatch"
    with pytest.raises(DomainError) as err:
        estimate(Q30, cluster, serving, ParallelConfig(tp=16, ep=16, etp=1, ep_dispatch="deepep"))
    assert err.value.field == "config.ep_dispatch"
    with pytest.raises(DomainError) as err:
        parse_pins(["ep_dispatch=nccl"])
    assert err.value.field == "pin.ep_dispatch"


def test_the_planner_dispatches_hierarchically_when_ep_leaves_the_node() -> None:
    cluster = resolve_cluster("dgx-h100:2")
    pinned = SearchSpace(pins=parse_pins(["ep=16", "tp=1", "pp=1"]))
    picked = plan(Q30, cluster, _w(), pinned, time_limit_s=20).plan
    assert picked is not None and picked.config.ep_dispatch == "deepep"
    kept = SearchSpace(pins=parse_pins(["ep=16", "tp=1", "pp=1", "ep_dispatch=alltoall"]))
    picked = plan(Q30, cluster, _w(), kept, time_limit_s=20).plan
    assert picked is not None and picked.config.ep_dispatch == "alltoall"


def test_megatron_export_names_the_dispatcher_routing_groups_and_graphs() -> None:
    cfg = ParallelConfig(tp=1, pp=8, dp=32, ep=32, etp=1, mbs=1, zero_stage=1, ep_dispatch="deepep")
    text = export("megatron", DSV3, _w("full_iteration"), cfg).content
    assert "--moe-token-dispatcher-type flex" in text and "--moe-flex-dispatcher-backend deepep" in text
    assert "--moe-router-num-groups 8" in text and "--moe-router-group-topk 4" in text
    assert "--cuda-graph-impl full_iteration" in text
    text = export("megatron", DSV3, _w("layers"), cfg.model_copy(update={"ep_dispatch": "alltoall"})).content
    assert "--moe-token-dispatcher-type alltoall" in text
    assert (
        "--cuda-graph-impl transformer_engine" in text and "--cuda-graph-modules attn moe_router moe_preprocess" in text
    )
