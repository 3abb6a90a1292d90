"""Megatron --pipeline-model-parallel-layout strings (issue 13): parsed as Megatron parses them, priced with their
own chunks, exported verbatim; a layout that does not cover the layers, an empty stage or a stage count that pp
does not divide is an error naming the field and the rule."""

from __future__ import annotations

import pytest

from optimizer.costmodel.estimate import estimate
from optimizer.errors import DomainError
from optimizer.exports.launch import export
from optimizer.spec.cluster_loading import load_cluster_preset
from optimizer.spec.model_loading import load_model_preset
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.pipeline_layout import parse_layout
from optimizer.spec.workload import TrainingWorkload

# Megatron-Bridge perf_recipes/llama/h100/llama3.py llama3_70b_pretrain_64gpu_h100_fp8cs_config
RECIPE_LAYOUT = "Et*2|(t*2|)*34,t*3|(t*2|)*3,tL"
W = TrainingWorkload(global_batch_size=256, seq_len=8192, precision="fp8", grad_dtype="bf16")


def _config(layout: str | None, **extra: object) -> ParallelConfig:
    fields: dict[str, object] = dict(
        tp=4, pp=8, dp=2, vp=5, mbs=1, schedule="interleaved-1f1b", sequence_parallel=True, zero_stage=1
    )
    fields.update(extra)
    return ParallelConfig(pipeline_layout=layout, **fields)  # type: ignore[arg-type]


def test_recipe_layout_is_parsed_priced_and_exported() -> None:
    ranks = parse_layout(RECIPE_LAYOUT, 8, 80)
    assert [sum(r) for r in ranks] == [10, 10, 10, 11, 10, 10, 10, 9]
    assert ranks[3] == (2, 2, 2, 2, 3) and ranks[7] == (2, 2, 2, 2, 1)
    model, cluster = load_model_preset("llama-3-70b"), load_cluster_preset("dgx-h100:8")
    est = estimate(model, cluster, W, _config(RECIPE_LAYOUT))
    assert est.feasible and [s.layers for s in est.stages] == [10, 10, 10, 11, 10, 10, 10, 9]
    same = estimate(model, cluster, W, _config(None, layers_per_stage=[10, 10, 10, 11, 10, 10, 10, 9]))
    assert est.step_time_s == pytest.approx(same.step_time_s)  # the layout's chunks are the canonical split here
    c = _config(RECIPE_LAYOUT, layers_per_stage=[s.layers for s in est.stages])
    assert f'--pipeline-model-parallel-layout "{RECIPE_LAYOUT}"' in export("megatron", model, W, c).content


@pytest.mark.parametrize(
    ("layout", "field", "rule"),
    [
        ("Et*2|(t*2|)*34,t*3|(t*2|)*3,ttL", "config.pipeline_layout", "81 decoder layers"),
        ("t*2|(t*2|)*34,t*3|(t*2|)*3,tEL", "config.pipeline_layout", "embedding E must appear once"),
        ("Et*2|(t*2|)*34,t*3|(t*2|)*3,t|L", "config.pipeline_layout", "not a multiple of pp=8"),
        (
            "Et*20|t*10|t*10||t*10|t*10|t*10|t*10L",
            "config.pipeline_layout",
            "virtual stage 3 (rank 3, chunk 0) is empty",
        ),
        ("Et*20|t*10|t*10|t*10|t*10|t*10|t*10|L", "config.pipeline_layout", "rank 7 holds no decoder layer"),
        ("Et*2|(t*2|)*34,t*3|(t*2|)*3,t*999999999L", "config.pipeline_layout", "unrolls beyond"),
        ("Et*2|(t*2|)*34,t*3|(t*2|)*3,tmL", "config.pipeline_layout", "MTP"),
        ("Et*2|(t*2|)*34,t*3|(t*2|)*3,txL", "config.pipeline_layout", "unknown symbols 'x'"),
    ],
)
def test_bad_layouts_name_the_rule(layout: str, field: str, rule: str) -> None:
    model, cluster = load_model_preset("llama-3-70b"), load_cluster_preset("dgx-h100:8")
    with pytest.raises(DomainError) as exc:
        estimate(model, cluster, W, _config(layout))
    assert exc.value.field == field and rule in exc.value.rule


def test_layout_must_agree_with_vp_and_the_framework() -> None:
    model, cluster = load_model_preset("llama-3-70b"), load_cluster_preset("dgx-h100:8")
    with pytest.raises(DomainError) as exc:
        estimate(model, cluster, W, _config(RECIPE_LAYOUT, vp=4))
    assert exc.value.field == "config.vp" and "5 virtual stages per rank" in exc.value.rule
    flat = "Et*10|t*10|t*10|t*10|t*10|t*10|t*10|t*10L"
    ds = W.model_copy(update={"framework": "deepspeed", "precision": "bf16"})
    with pytest.raises(DomainError) as exc:
        estimate(model, cluster, ds, _config(flat, vp=1, schedule="1f1b", sequence_parallel=False))
    assert exc.value.field == "config.pipeline_layout" and "deepspeed" in exc.value.rule
