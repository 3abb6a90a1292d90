"""Multi-token prediction modules (DeepSeek-V3; Megatron --mtp-num-layers, layout symbol m) [issue 13: every
configuration a framework runs is admitted]: priced on the last rank as one more transformer layer, a projection
and one more logits pass, with the embedding the modules read; refused by frameworks without MTP, naming the knob."""

from __future__ import annotations

import pytest

from optimizer.costmodel.estimate import estimate
from optimizer.errors import DomainError
from optimizer.exports.launch import export
from optimizer.search.planner import plan
from optimizer.search.space import SearchSpace, parse_pins
from optimizer.spec.cluster_loading import load_cluster_preset
from optimizer.spec.model_loading import load_model_preset
from optimizer.spec.model_spec import ModelSpec
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.pipeline_layout import parse_layout
from optimizer.spec.workload import TrainingWorkload
from tests.optimizer.helpers import deepseek_v3_h100

# Megatron-Bridge 25.09 DeepSeek-V3 H100 recipe (scripts/performance/run_script.py): pp 8, vp 4, one MTP layer.
LAYOUT = "Et|(tt|)*30mL"
W = TrainingWorkload(global_batch_size=512, seq_len=4096, precision="fp8", grad_dtype="bf16")


def _models() -> tuple[ModelSpec, ModelSpec]:
    base = load_model_preset("deepseek-v3")
    return base, base.model_copy(update={"mtp_layers": 1})


def _config(layout: str | None) -> ParallelConfig:
    return deepseek_v3_h100(recompute="selective", recompute_modules=("mla_up_proj", "mlp"), pipeline_layout=layout)


def test_recipe_layout_with_mtp_is_admitted_and_priced_on_the_last_rank() -> None:
    assert [sum(r) for r in parse_layout(LAYOUT, 8, 61, 1)] == [7, 8, 8, 8, 8, 8, 8, 6]
    base, mtp = _models()
    cluster = load_cluster_preset("dgx-h100:128")
    with_mtp = estimate(mtp, cluster, W, _config(LAYOUT))
    # The same decoder layout without the MTP layer: only the last rank changes.
    without = estimate(base, cluster, W, _config(LAYOUT.replace("mL", "L")))
    assert with_mtp.feasible
    first, last = 0, len(with_mtp.stages) - 1
    assert with_mtp.stages[first].forward_s == pytest.approx(without.stages[first].forward_s)
    # One MoE layer of a rank's six plus a second logits pass (V = 129,280 at h = 7,168): more than a sixth more.
    assert with_mtp.stages[last].forward_s > without.stages[last].forward_s * (1 + 1 / 6)
    # The last rank holds the embedding the MTP module reads (V x h / tp) besides the layer's weights.
    extra = with_mtp.stages[last].memory_gb.embedding_lm_head - without.stages[last].memory_gb.embedding_lm_head
    assert extra > 0.9 * mtp.vocab_size * mtp.hidden_size / 2 * 2 / 1e9
    assert with_mtp.step_time_s > without.step_time_s


@pytest.mark.parametrize(
    ("layout", "rule"),
    [
        ("Et|(tt|)*30L", "holds 0 MTP layers (m); the model has mtp_layers=1"),
        ("Et|(tt|)*29,t|mtL", "must follow every decoder layer"),
        ("Et|(tt|)*28,tttt|m|L", "must all sit in the last virtual stage"),
    ],
)
def test_bad_mtp_layouts_name_the_rule(layout: str, rule: str) -> None:
    _, mtp = _models()
    with pytest.raises(DomainError) as err:
        estimate(mtp, load_cluster_preset("dgx-h100:128"), W, _config(layout))
    assert err.value.field == "config.pipeline_layout" and rule in str(err.value)


def test_frameworks_without_mtp_refuse_it_naming_the_knob() -> None:
    _, mtp = _models()
    cluster = load_cluster_preset("dgx-h100:128")
    for fw in ("deepspeed", "torchtitan"):
        w = W.model_copy(update={"framework": fw})
        with pytest.raises(DomainError) as err:
            estimate(mtp, cluster, w, ParallelConfig(tp=8, pp=16, dp=8, ep=8, zero_stage=1))
        assert err.value.field == "model.mtp_layers" and fw in str(err.value)
    c = _config(LAYOUT)
    with pytest.raises(DomainError) as err:
        export("torchtitan", mtp, W, c.model_copy(update={"layers_per_stage": [7, 8, 8, 8, 8, 8, 8, 6]}))
    assert err.value.field == "export.mtp_layers"


def test_megatron_export_writes_the_mtp_layers() -> None:
    _, mtp = _models()
    c = _config(LAYOUT).model_copy(update={"layers_per_stage": [7, 8, 8, 8, 8, 8, 8, 6]})
    content = export("megatron", mtp, W, c).content
    assert "--mtp-num-layers 1" in content and f'"{LAYOUT}"' in content
    # Without a layout the export writes one that places the MTP layer with the loss.
    even = _config(None).model_copy(update={"layers_per_stage": [7, 8, 8, 8, 8, 8, 8, 6], "pipeline_layout": None})
    written = export("megatron", mtp, W, even).content
    assert "mL" in written and parse_layout(written.split('layout "')[1].split('"')[0], 8, 61, 1)


def test_auto_plans_an_mtp_model_with_the_framework_that_trains_it() -> None:
    _, mtp = _models()
    assert mtp.moe is not None
    small = mtp.model_copy(update={"num_layers": 8, "moe": mtp.moe.model_copy(update={"first_k_dense": 1})})
    w = TrainingWorkload(global_batch_size=64, seq_len=4096, precision="fp8", framework="auto")
    space = SearchSpace(pins=parse_pins(["pp=2", "tp=8", "ep=8"]))
    result = plan(small, load_cluster_preset("dgx-h100:16"), w, space, time_limit_s=20)
    assert result.plan is not None
    assert [o.framework for o in result.framework_comparison or []] == ["megatron"]
