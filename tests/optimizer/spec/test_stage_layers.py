"""Layer counts per rank and per virtual stage (optimizer/spec/stage_layers.py): Megatron's layouts are admitted,
their memory follows the interleaved schedule's order, and the export writes the split that was priced."""

from __future__ import annotations

import re

import pytest

from optimizer.costmodel.estimate import estimate
from optimizer.costmodel.memory import inflight_microbatches
from optimizer.exports.launch import export, megatron_layout
from optimizer.search.planner import plan
from optimizer.search.space import SearchSpace, parse_pins
from optimizer.spec.cluster_loading import load_cluster_preset
from optimizer.spec.model_loading import load_model_preset
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.stage_layers import LayerRules, chunk_inflight_counts, virtual_split
from optimizer.spec.workload import TrainingWorkload


def _megatron_warmup_chunks(pp: int, vp: int, rank: int, m: int) -> list[int]:
    """Chunks of the forwards a rank runs before its first backward, plus the one in flight, straight from
    Megatron's schedule table (get_schedule_table with microbatch_group_size_per_vp_stage = pp) and warm-up
    count (get_num_warmup_microbatches)."""
    table = []
    for lo in range(0, m, pp):
        hi = min(lo + pp, m)
        table += [(mb, chunk) for chunk in range(vp) for mb in range(lo, hi)]
    warmup = min((pp - rank - 1) * 2 + (vp - 1) * pp, m * vp)
    return [chunk for _, chunk in table[: min(warmup + 1, m * vp)]]


@pytest.mark.parametrize(("pp", "vp", "m"), [(4, 2, 8), (8, 8, 64), (4, 3, 4), (2, 5, 2)])
def test_inflight_counts_follow_megatrons_schedule_table(pp: int, vp: int, m: int) -> None:
    for rank in range(pp):
        chunks = _megatron_warmup_chunks(pp, vp, rank, m)
        assert list(chunk_inflight_counts(pp, vp, rank, m)) == [chunks.count(k) for k in range(vp)]


def test_uneven_chunks_hold_what_the_schedule_keeps_in_flight() -> None:
    c = ParallelConfig(pp=8, vp=8, schedule="interleaved-1f1b")
    # 15 layers over 8 chunks: one chunk of 1 (chunk 0, run most often in the warm-up), seven of 2.
    assert virtual_split(15, 8) == [1, 2, 2, 2, 2, 2, 2, 2]
    chunks = _megatron_warmup_chunks(8, 8, 0, 64)
    layers_held = sum(virtual_split(15, 8)[k] for k in chunks)
    assert inflight_microbatches(c, 0, 64, 15) * 15 == pytest.approx(layers_held)
    # Even chunks: the textbook p(1 + (p-1)/(pv)) of K22 §4.2.3.
    assert inflight_microbatches(c, 0, 64, 16) == pytest.approx(8 * (1 + 7 / 64))


def test_layer_rules() -> None:
    llama405 = load_model_preset("llama-3.1-405b")  # 126 layers
    flexible = LayerRules.of(llama405, 8, 8, True)
    assert flexible.admits() and 15 in flexible.first_counts() and 15 in flexible.other_counts()
    fixed = LayerRules.of(llama405, 8, 8, False)
    assert fixed.first_counts()[0] == 8 and all(x % 8 == 0 for x in fixed.other_counts())
    assert fixed.default_split() is None  # 126 is not a multiple of 64
    # Llama 3 405B on pp=16 [Llama 3 paper §3.3.2]: one layer fewer on the first and the last stage.
    assert LayerRules.of(llama405, 16, 1, True).default_split() == [7] + [8] * 14 + [7]
    # MoE: the leading dense layers stay on rank 0 and later ranks hold whole MoE periods.
    dsv3 = load_model_preset("deepseek-v3")
    assert dsv3.moe is not None
    rules = LayerRules.of(dsv3, 4, 2, True)
    assert min(rules.first_counts()) >= dsv3.moe.first_k_dense > 0
    assert all(x % dsv3.moe.layer_freq == 0 for x in rules.other_counts())


def test_issue_405b_recipe_is_admitted_and_exported_as_a_layout() -> None:
    """The pinned Llama 3.1 405B recipe of issue 13 (pp=8 x vp=8 over 126 layers) answered INFEASIBLE under the
    old 'every virtual stage holds the same layers' rule."""
    model = load_model_preset("llama-3.1-405b")
    cluster = load_cluster_preset("dgx-h100:128")
    w = TrainingWorkload(global_batch_size=512, seq_len=8192, precision="fp8")
    pins = parse_pins(["tp=8", "pp=8", "dp=8", "cp=2", "mbs=1", "vp=8"])
    res = plan(model, cluster, w, SearchSpace(pins=pins), time_limit_s=30)
    assert res.status == "OPTIMAL" and res.plan is not None
    c = res.plan.config
    assert c.layers_per_stage is not None and sum(c.layers_per_stage) == 126
    assert any(n % 8 for n in c.layers_per_stage)  # the uneven virtual stages the old rule rejected
    est = estimate(model, cluster, w, c)
    assert est.feasible
    args = export("megatron", model, w, c).content
    layout = re.search(r'--pipeline-model-parallel-layout "([^"]+)"', args)
    assert layout is not None and layout.group(1) == megatron_layout(list(c.layers_per_stage), 8)
    stages = layout.group(1).split("|")
    assert len(stages) == 64 and stages[0].startswith("E") and stages[-1].endswith("L")
    decoders = sum(int(x[2:]) if x.startswith("t*") else 1 for s in stages for x in s.split(",") if x.startswith("t"))
    assert decoders == 126
