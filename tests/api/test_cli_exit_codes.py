"""One exit-code contract for `plan` and `estimate` (README "Exit codes"; issue 48 §2: `plan` exited 0 when
nothing fit): 0 fits, 1 does not fit, 2 bad input, 3 a plan search that found nothing within its time limit."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from api.cli import app
from api.cli_output import plan_exit_code

RUNNER = CliRunner()
TOO_BIG = ["--model", "llama-3.1-405b", "--cluster", "dgx-a100", "--gbs", "8", "--seq-len", "4096"]
FITS = ["--model", "llama-2-7b", "--cluster", "dgx-h100", "--gbs", "8", "--seq-len", "2048"]


@pytest.mark.parametrize("as_json", [[], ["--json"]], ids=["text", "json"])
def test_plan_that_nothing_fits_exits_1(as_json: list[str]) -> None:
    r = RUNNER.invoke(app, ["plan", *TOO_BIG, "--time-limit", "20", *as_json])
    assert r.exit_code == 1, (r.exit_code, r.output[-400:])
    assert "INFEASIBLE" in r.output
    if as_json:
        assert json.loads(r.stdout)["status"] == "INFEASIBLE"  # the JSON is whole before the exit


@pytest.mark.parametrize("as_json", [[], ["--json"]], ids=["text", "json"])
def test_estimate_that_does_not_fit_exits_1_and_one_that_fits_0(as_json: list[str]) -> None:
    bad = RUNNER.invoke(app, ["estimate", *TOO_BIG, "--tp", "8", *as_json])
    assert bad.exit_code == 1, (bad.exit_code, bad.output[-400:])
    good = RUNNER.invoke(app, ["estimate", *FITS, "--tp", "8", *as_json])
    assert good.exit_code == 0, good.output[-400:]
    if as_json:
        assert json.loads(bad.stdout)["feasible"] is False and json.loads(good.stdout)["feasible"] is True


def test_plan_that_fits_exits_0_and_bad_input_2() -> None:
    assert RUNNER.invoke(app, ["plan", *FITS, "--json"]).exit_code == 0
    bad = RUNNER.invoke(app, ["plan", *FITS, "--pin", "tp=three"])
    assert bad.exit_code == 2 and bad.stderr.startswith("error: "), bad.output[-300:]


def test_a_search_out_of_time_is_not_called_does_not_fit() -> None:
    assert [plan_exit_code(s) for s in ("OPTIMAL", "FEASIBLE", "REPORTED", "INFEASIBLE", "UNKNOWN")] == [0, 0, 0, 1, 3]
