"""Every Megatron-Bridge performance-summary row of the preset models (accuracy/data/megatron_bridge_summary.csv,
160 rows on H100, B200, GB200, B300, GB300) fits with its published parallel knobs (issue 13: no published run
predicted infeasible), and the newest containers' rows stay where benchmarks/bridge_summary.py measured them."""

from __future__ import annotations

import statistics

from accuracy.bridge_rows import NEWEST, bridge_rows, ordered_pairs, price
from benchmarks.bridge_summary import _p90


def test_every_published_row_fits_with_its_knobs() -> None:
    rows = [price(rec) for rec in bridge_rows()]
    assert len(rows) == 160
    unpriced = [f"{r.container} {r.system} {r.label}: {r.note}" for r in rows if r.predicted_s is None]
    assert not unpriced, unpriced


def test_newest_rows_median_error() -> None:
    rows = [price(rec) for rec in bridge_rows() if rec["container"].startswith(NEWEST)]
    errors = [abs(r.error) for r in rows if r.error is not None]
    assert len(errors) == 27
    assert statistics.median(errors) <= 0.08  # 6.1% with the recipes' A2A overlap and offloaded layers


def test_dense_and_moe_rows_against_issue_13s_external_targets() -> None:
    """Issue 13 measures pinned runs the project does not ship: dense median <= 8% and p90 <= 25%, MoE median
    <= 15%; issue 12 all runs p90 <= 25%. Today: dense median 2.9%, p90 11.6%; MoE median 9.0% (p90 27.9%, above
    the target: open); all rows p90 19.5% with the recipes' dispatcher, CUDA graphs and A2A overlap priced and
    recompute searched as the planner does."""
    rows = [(rec, price(rec)) for rec in bridge_rows()]
    dense = sorted(abs(r.error) for rec, r in rows if int(rec["ep"]) == 1 and r.error is not None)
    moe = sorted(abs(r.error) for rec, r in rows if int(rec["ep"]) > 1 and r.error is not None)
    assert len(dense) == 62 and len(moe) == 98
    assert statistics.median(dense) <= 0.05 and _p90(dense) <= 0.15
    assert statistics.median(moe) <= 0.11 and _p90(moe) <= 0.30
    assert _p90(sorted(dense + moe)) <= 0.22


def test_same_setup_pairs_are_ordered_as_measured() -> None:
    """Issue 12: at least 90% of same-setup comparison pairs ordered right on runs the project does not ship.
    Today 170 of 183 (92.9%); the misses are GB300 FP8 vs MXFP8 405B rows, GB300 vs GB200 DeepSeek-V3 before the
    recipes' A2A overlap, and the older containers' Qwen3 rows."""
    ok, total = ordered_pairs([(rec, price(rec)) for rec in bridge_rows()])
    assert total >= 150
    assert ok / total >= 0.92
