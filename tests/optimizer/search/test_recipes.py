"""The published-recipe table (optimizer/search/recipe_table.py) against the data the project cites, its matching,
its scaling rule, and the claim sentence (issue 53 §3)."""

from __future__ import annotations

import csv
from importlib import resources

import pytest

from accuracy.published_runs import load_records
from optimizer.search.candidates import TrainingSpace
from optimizer.search.recipe_table import RECIPES, Recipe
from optimizer.search.recipes import claim_band, is_preset, matching, price, scaled_dp, terms_paid
from optimizer.search.space import SearchSpace, parse_pins
from optimizer.spec.cluster_loading import resolve_cluster
from optimizer.spec.model_loading import resolve_model
from optimizer.spec.workload import TrainingWorkload

RECORDS = {r["id"]: r for r in load_records()}
BRIDGE_SYSTEMS = {"DGX-H100": "H100-SXM-80GB", "DGX-B200": "B200-180GB"}


def _bridge_rows() -> list[dict[str, str]]:
    text = (resources.files("accuracy") / "data" / "megatron_bridge_summary.csv").read_text()
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    return list(csv.DictReader(lines))


def _knob(r: Recipe, name: str) -> int:
    return int(r.config.get(name, 1))  # type: ignore[call-overload]


@pytest.mark.parametrize("r", [r for r in RECIPES if r.record in RECORDS], ids=lambda r: r.id)
def test_rows_match_their_published_record(r: Recipe) -> None:
    rec = RECORDS[str(r.record)]
    par = rec["parallel"]
    assert rec["cluster"]["gpu_type"] == r.gpu and rec["cluster"]["num_gpus"] == r.gpus
    assert rec["model"]["seq_len"] == r.seq_len
    assert str(rec["precision"]).lower().startswith(r.precision)
    for knob in ("tp", "pp", "cp", "ep"):
        assert (par.get(knob) or 1) == _knob(r, knob), knob
    if par.get("virtual_stages"):
        assert par["virtual_stages"] == _knob(r, "vp")
    assert rec["batch"]["micro_batch_size"] == _knob(r, "mbs")
    assert r.gpus // (_knob(r, "tp") * _knob(r, "pp") * _knob(r, "cp")) == par["dp"]
    if par.get("recompute") and "recompute" not in r.open:
        assert par["recompute"] == r.config.get("recompute")
    for knob in ("pipeline_layout", "ep_comm_overlap", "tp_comm_overlap", "ep_dispatch"):
        if par.get(knob) is not None and knob in r.config:
            assert par[knob] == r.config[knob], knob
    for knob in ("layers_per_stage", "recompute_modules"):
        if par.get(knob) is not None and knob in r.config:
            assert list(par[knob]) == list(r.config[knob]), knob  # type: ignore[call-overload]


@pytest.mark.parametrize("r", [r for r in RECIPES if r.record and "/" in r.record], ids=lambda r: r.id)
def test_rows_match_the_bridge_summary(r: Recipe) -> None:
    container, system = str(r.record).split("/")
    rows = [
        row
        for row in _bridge_rows()
        if row["container"] == container and row["system"] == system and row["preset"] == r.model
    ]
    assert rows, r.record
    row = rows[0]
    assert BRIDGE_SYSTEMS[system] == r.gpu and int(row["gpus"]) == r.gpus and int(row["seq_len"]) == r.seq_len
    assert "FP8" in row["precision"] and r.precision == "fp8"
    for knob in ("tp", "pp", "cp", "vp", "ep", "mbs"):
        assert int(row[knob]) == _knob(r, knob), knob


def test_every_row_cites_its_source_and_names_a_preset() -> None:
    for r in RECIPES:
        assert "http" in r.source or "perf_recipes" in r.source, r.id
        assert is_preset(resolve_model(r.model), r.model)
    assert len({r.id for r in RECIPES}) == len(RECIPES)


def test_dp_grows_with_the_cluster_as_meta_scaled_it() -> None:
    """Meta's Table 4: the 16,384-GPU layout (TP 8, PP 16, DP 128) at 8,192 GPUs is DP 64, the paper's row."""
    meta = next(r for r in RECIPES if r.id == "meta-llama3-405b-16384")
    half = RECORDS["dubey2024_llama3_405b_8192_cp1"]
    assert scaled_dp(meta, half["cluster"]["num_gpus"], half["batch"]["global_batch_size"]) == half["parallel"]["dp"]
    assert scaled_dp(meta, 64, 2048) is None  # not one TP 8 x PP 16 group fits 64 GPUs


def test_matching_needs_the_preset_gpu_precision_and_sequence() -> None:
    model, cluster = resolve_model("deepseek-v3"), resolve_cluster("dgx-h100:128")
    pools = list(cluster.pools)
    w = TrainingWorkload(global_batch_size=8192, seq_len=4096, precision="fp8")
    assert [r.id for r in matching(model, cluster, w, pools)] == ["bridge2509-h100-deepseek-v3-fp8-1024"]
    assert matching(model, cluster, w.model_copy(update={"precision": "bf16"}), pools) == []
    assert matching(model, cluster, w.model_copy(update={"seq_len": 8192}), pools) == []
    other = model.model_copy(update={"num_layers": 60})
    assert matching(other, cluster, w, pools) == []


def test_recipe_priced_and_pins_respected() -> None:
    model, cluster = resolve_model("deepseek-v3"), resolve_cluster("dgx-h100:128")
    w = TrainingWorkload(global_batch_size=8192, seq_len=4096, precision="fp8")
    ts = TrainingSpace(model, cluster, w, SearchSpace())
    (priced,), refused = price(model, cluster, w, ts.space, ts.pools, ts.budget)
    assert not refused and not priced.scaled
    assert priced.config.pipeline_layout == "Et|(tt|)*30L"  # the MTP block's 'm' dropped: the preset has none
    assert not any(s.oom_risk for s in priced.estimate.stages)
    pinned = SearchSpace(pins=parse_pins(["tp=8"]))
    assert price(model, cluster, w, pinned, ts.pools, ts.budget)[0] == []


def test_claim_band_and_terms() -> None:
    gain, lo, hi = claim_band(10.0, 13.6)
    assert gain == pytest.approx(0.36) and lo < gain < hi and lo > 0
    gain, lo, hi = claim_band(10.0, 10.1)
    assert lo < 0 < hi
    model, cluster = resolve_model("llama-3.1-405b"), resolve_cluster("dgx-h100:2048")
    w = TrainingWorkload(global_batch_size=2048, seq_len=8192)
    ts = TrainingSpace(model, cluster, w, SearchSpace())
    (meta,), _ = price(model, cluster, w, ts.space, ts.pools, ts.budget)
    assert terms_paid(meta.estimate, meta.estimate) == []
