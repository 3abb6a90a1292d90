"""Options that used to be silently ignored: `plan --schedules bogus` searched no listed schedule and said nothing;
`--calibration` on a file without `pools` (a model file) priced with no calibration (issue 37 §5)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from api.cli import app
from optimizer.search.space import SearchSpace

RUNNER = CliRunner()
MODEL = ["--model", "llama-3-8b", "--cluster", "dgx-h100:2", "--gbs", "64", "--seq-len", "4096"]
ESTIMATE = ["estimate", *MODEL, "--tp", "2", "--dp", "8", "--sp", "--zero", "1", "--json"]
PRESET = Path(__file__).parents[2] / "optimizer" / "spec" / "presets" / "models" / "llama-3-8b.json"


def test_a_search_space_refuses_unknown_schedules() -> None:
    assert SearchSpace(schedules=("zb-h1", "1f1b")).schedules == ("zb-h1", "1f1b")
    for bad in (("bogus",), ("1f1b", ""), ()):
        with pytest.raises(ValidationError, match="schedule"):
            SearchSpace(schedules=bad)


def test_plan_names_an_unknown_schedule() -> None:
    result = RUNNER.invoke(app, ["plan", *MODEL, "--schedules", "1f1b,bogus", "--time-limit", "0.1"])
    assert result.exit_code == 2, result.output[-300:]
    assert result.output.startswith("error: space.schedules") and "'bogus'" in result.output


def test_a_calibration_without_pools_is_refused() -> None:
    result = RUNNER.invoke(app, [*ESTIMATE, "--calibration", str(PRESET)])
    assert result.exit_code == 2, result.output[-300:]
    assert result.output.startswith("error: --calibration:") and "pools" in result.output


def test_a_calibration_as_the_service_lists_it_is_applied(tmp_path: Path) -> None:
    listed = tmp_path / "cal.json"
    listed.write_text(json.dumps({"id": 1, "number": 1, "constants": {"pools": {"dgx-h100": {"compute": 0.8}}}}))
    plain = json.loads(RUNNER.invoke(app, ESTIMATE).stdout)["step_time_s"]
    slow = json.loads(RUNNER.invoke(app, [*ESTIMATE, "--calibration", str(listed)]).stdout)["step_time_s"]
    assert slow > plain * 1.1


def test_a_job_with_an_unknown_schedule_is_a_domain_error() -> None:
    """The service's search options share the rule (HTTP 422 naming search.schedules, not a server error)."""
    from optimizer.errors import DomainError
    from service.job_requests import SearchOptions

    with pytest.raises(DomainError, match=r"search\.schedules.*bogus"):
        SearchOptions(schedules=["1f1b", "bogus"]).space()
