"""How context-parallel attention communicates (Megatron --cp-comm-type) [issue 13: ring vs all-to-all CP where the
framework has it]: the ring hides its K/V hops under the attention steps, the all-gather kind exposes its gather
(Llama 3), the all-to-all kind (Ulysses) moves Q, K, V and the output but splits heads, not the sequence."""

from __future__ import annotations

import pytest

from optimizer.costmodel.estimate import estimate
from optimizer.errors import DomainError
from optimizer.exports.launch import export
from optimizer.search.candidates import TrainingSpace
from optimizer.search.planner import plan
from optimizer.search.space import SearchSpace, parse_pins
from optimizer.spec.cluster_loading import load_cluster_preset
from optimizer.spec.model_loading import load_model_preset
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import TrainingWorkload

W = TrainingWorkload(global_batch_size=64, seq_len=16384)


def _cfg(kind: str, **kw: object) -> ParallelConfig:
    fields: dict[str, object] = dict(
        tp=8, cp=4, pp=8, dp=2, mbs=1, sequence_parallel=True, tp_comm_overlap=True, zero_stage=1, recompute="full"
    )
    fields.update(kw)
    return ParallelConfig(cp_comm=kind, **fields)  # type: ignore[arg-type]


def test_each_kind_prices_its_own_traffic() -> None:
    """GPT-3 175B (multi-head attention, K and V as wide as Q) at 16K with cp 4 across nodes: the ring's K/V blocks
    outlast the attention steps; the all-to-all moves Q, K, V and O once each way and comes out cheaper; the
    all-gather moves as much as the ring, all of it exposed. With grouped-query attention (Llama 3 70B, 8 KV heads)
    K and V are an eighth of Q: the ring hides its hops and the all-to-all, moving Q and O too, costs more."""
    gpt3, cluster = load_model_preset("gpt-3-175b"), load_cluster_preset("dgx-h100:64")
    t = {k: estimate(gpt3, cluster, W, _cfg(k)) for k in ("p2p", "allgather", "a2a")}
    assert t["a2a"].breakdown.cp_comm < t["p2p"].breakdown.cp_comm < t["allgather"].breakdown.cp_comm
    assert t["a2a"].step_time_s < t["p2p"].step_time_s < t["allgather"].step_time_s
    llama = load_model_preset("llama-3-70b")
    w = TrainingWorkload(global_batch_size=64, seq_len=32768)
    g = {k: estimate(llama, cluster, w, _cfg(k, tp=4, cp=2, dp=8)) for k in ("p2p", "a2a")}
    assert g["p2p"].breakdown.cp_comm < g["a2a"].breakdown.cp_comm


@pytest.mark.parametrize(
    ("config", "framework", "field", "rule"),
    [
        (_cfg("a2a", tp=4, cp=4), "megatron", "config.cp_comm", "cp=4 to divide the heads of a TP rank"),
        (_cfg("allgather", cp=1, dp=8), "megatron", "config.cp_comm", "needs cp > 1"),
        (_cfg("a2a", tp=8, cp=4), "torchtitan", "config.cp_comm", "not available in torchtitan"),
    ],
)
def test_bad_cp_comm_names_the_rule(config: ParallelConfig, framework: str, field: str, rule: str) -> None:
    model = load_model_preset("llama-3-70b" if config.tp == 4 else "gpt-3-175b")
    w = W.model_copy(update={"framework": framework})
    with pytest.raises(DomainError) as err:
        estimate(model, load_cluster_preset("dgx-h100:64"), w, config)
    assert err.value.field == field and rule in str(err.value)


def test_search_takes_the_all_to_all_where_heads_allow_and_allgather_when_pinned() -> None:
    gpt3, cluster = load_model_preset("gpt-3-175b"), load_cluster_preset("dgx-h100:64")
    space = TrainingSpace(gpt3, cluster, W, SearchSpace())
    assert space._cp_comm_values(4, 8) == ("p2p", "a2a")  # 96 heads / tp 8 = 12 per rank: cp 4 divides them
    assert space._cp_comm_values(8, 8) == ("p2p",)
    assert space._cp_comm_values(1, 8) == ("p2p",)
    pinned = TrainingSpace(gpt3, cluster, W, SearchSpace(pins=parse_pins(["cp_comm=allgather"])))
    assert pinned._cp_comm_values(4, 8) == ("allgather",)
    res = plan(gpt3, cluster, W, SearchSpace(pins=parse_pins(["cp=4", "tp=8", "pp=8"])), time_limit_s=30)
    assert res.plan is not None and res.plan.config.cp_comm == "a2a"
    assert "--cp-comm-type a2a" in export("megatron", gpt3, W, res.plan.config).content
