"""The published goodput figures (accuracy/goodput_runs.py, issue 46 §3): each cited, grouped apart from the run the
model was built on, the quarantine logged before tuning, the built-on lower bound met, and the recovery mode's
published effect pointing the right way."""

from __future__ import annotations

from pathlib import Path

from accuracy.goodput_runs import GROUPS, load_runs, price, score

LOG = Path(__file__).resolve().parents[2] / "accuracy" / "data" / "quarantine" / "goodput_LOG.md"


def test_every_run_is_cited_grouped_and_the_quarantine_is_logged() -> None:
    runs = load_runs()
    assert {r["group"] for r in runs} == set(GROUPS)
    assert [r["id"] for r in runs if r["group"] == "built_on"] == ["dubey2024_llama3_405b_ettr"]
    log = LOG.read_text()
    for r in runs:
        assert len(r["citation"]) > 40 and r["bound"] in ("point", "lower", "upper") and 0 < r["published"] < 1
        if r["group"] == "quarantine":
            assert f"`{r['id']}`" in log  # scored and logged before any tuning


def test_the_built_on_run_meets_its_lower_bound_and_the_band_holds_the_point() -> None:
    c = price(next(r for r in load_runs() if r["group"] == "built_on"))
    assert c.bound_met is True and c.band[0] <= c.predicted <= c.band[1]


def test_manual_restarts_cost_what_automatic_ones_do_not() -> None:
    runs = {r["id"]: r for r in load_runs()}
    auto, manual = price(runs["fan2024_hlat_auto_resume"]), price(runs["fan2024_hlat_manual"])
    published = auto.published - manual.published  # +21 points for automatic resume
    predicted = auto.predicted - manual.predicted
    assert predicted > 0.25 * published > 0  # the effect points the right way and is of its order
    sc = score("scored", [auto, manual])
    assert sc is not None and sc.n == 2
