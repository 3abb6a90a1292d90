"""The 80% intervals cover 75-85% of published runs from sources they did not see, and the shipped residual table
is the current model's (issue 38 §1; docs/uncertainty.md)."""

from __future__ import annotations

import json
import math

import pytest

from accuracy.leave_out import RESIDUALS_PATH, leave_out_table
from benchmarks.uncertainty import Scored, nested_step_times
from optimizer.costmodel.uncertainty import MIN_RUNS, residual_table


@pytest.fixture(scope="module")
def scored() -> list[Scored]:
    return nested_step_times(residual_table())


def _coverage(items: list[Scored]) -> float:
    return sum(s.covered for s in items) / len(items)


def test_nested_coverage_overall(scored: list[Scored]) -> None:
    assert len(scored) >= 120
    assert 0.75 <= _coverage(scored) <= 0.85


def test_nested_coverage_per_regime(scored: list[Scored]) -> None:
    regimes: dict[str, list[Scored]] = {}
    for s in scored:
        regimes.setdefault(s.regime, []).append(s)
    big = {name: items for name, items in regimes.items() if len(items) >= MIN_RUNS}
    assert big
    for name, items in big.items():
        assert 0.75 <= _coverage(items) <= 0.85, name


def test_shipped_residuals_match_the_model() -> None:
    """In-sample predictions and left-out residuals recomputed now equal the shipped file (1e-9 relative); the
    left-out recomputation (grids of the refit constants) takes ~10 s."""
    shipped = json.loads(RESIDUALS_PATH.read_text())
    fresh = leave_out_table()
    old = {(r["id"], r["metric"]): r for r in shipped["records"]}
    new = {(r["id"], r["metric"]): r for r in fresh["records"]}
    assert old.keys() == new.keys(), "regenerate: .venv/bin/python -m accuracy.leave_out --write"
    for key, r in new.items():
        for name in ("predicted", "measured"):
            assert math.isclose(r[name], old[key][name], rel_tol=1e-9), (key, name)
        for name in ("in_sample", "left_out"):
            assert math.isclose(r[name], old[key][name], rel_tol=1e-9, abs_tol=1e-12), (key, name)
        assert r["features"] == old[key]["features"], key
    assert fresh["meta"]["held"] == shipped["meta"]["held"]
