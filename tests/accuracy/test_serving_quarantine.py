"""The serving quarantine [issue 50 §4]: sources the serving data set does not use, every record cited, scored by the
simulation, and logged before any change."""

from __future__ import annotations

from importlib import resources

from accuracy.serving_quarantine import load_quarantine, model_class, predict_quarantine
from accuracy.serving_runs import load_serving_records


def test_quarantine_sources_are_not_used_by_the_fitted_data_set() -> None:
    sources, records = load_quarantine()
    used, _ = load_serving_records()
    assert records and not set(sources) & set(used)
    used_paths = {(s["repo"], s["path"]) for s in used.values()}
    for sid, src in sources.items():
        assert src["repo"] and src["path"] and len(src["commit"]) == 40, sid
        assert (src["repo"], src["path"]) not in used_paths
    assert all(r["source"] in sources for r in records)


def test_every_source_has_a_dated_first_score_in_the_log() -> None:
    log = (resources.files("accuracy") / "data" / "quarantine" / "serving_LOG.md").read_text()
    sources, _ = load_quarantine()
    for sid in sources:
        assert f"`{sid}`" in log


def test_a_burst_row_is_scored_on_ttft_tpot_and_throughput() -> None:
    _, records = load_quarantine()
    rec = next(r for r in records if r["id"] == "gs_dsr1_vllm_tp8_2k")
    assert model_class(rec) == "moe"
    cases = {c.metric: c for c in predict_quarantine(rec)}
    assert set(cases) == {"mean_ttft_ms", "median_ttft_ms", "mean_tpot_ms", "output_tokens_per_s"}
    assert all(c.predicted > 0 for c in cases.values())
