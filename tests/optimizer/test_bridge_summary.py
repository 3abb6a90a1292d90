"""Every Megatron-Bridge performance-summary row of the preset models (benchmarks/data/megatron_bridge_summary.csv,
160 rows on H100, B200, GB200, B300, GB300) fits with its published parallel knobs (issue 13: no published run
predicted infeasible), and the newest containers' rows stay where benchmarks/bridge_summary.py measured them."""

from __future__ import annotations

import statistics

from benchmarks.bridge_summary import NEWEST, _rows, price


def test_every_published_row_fits_with_its_knobs() -> None:
    rows = [price(rec) for rec in _rows()]
    assert len(rows) == 160
    unpriced = [f"{r.container} {r.system} {r.label}: {r.note}" for r in rows if r.predicted_s is None]
    assert not unpriced, unpriced


def test_newest_rows_median_error() -> None:
    rows = [price(rec) for rec in _rows() if rec["container"].startswith(NEWEST)]
    errors = [abs(r.error) for r in rows if r.error is not None]
    assert len(errors) == 27
    assert statistics.median(errors) <= 0.15
