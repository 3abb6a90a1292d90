"""Service commands check their settings and their database before they start: one line naming the setting, exit
code 2, never a traceback and never a process started on a bad value (issue 37 §5). In-process, except where the
process's exit code is the point."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import uvicorn
from typer.testing import CliRunner

from api.cli import app

RUNNER = CliRunner()
MESHPLAN = str(Path(sys.executable).parent / "meshplan")


def _one_line_exit_2(args: list[str], env: dict[str, str], names: str) -> None:
    result = RUNNER.invoke(app, args, env=env)
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2, (args, env, result.exit_code, result.output[-500:], result.exception)
    assert len(lines) == 1 and lines[0].startswith(f"error: {names}"), (args, result.output[-500:])


@pytest.fixture
def no_server(monkeypatch: pytest.MonkeyPatch) -> None:
    """A serve that got past its checks would fail the test instead of listening."""

    def refuse(*_a: object, **_k: object) -> None:
        raise AssertionError("serve started on a bad setting")

    monkeypatch.setattr(uvicorn, "run", refuse)


BAD_SETTINGS = [
    ({"MESHPLAN_REPLAN_AT": "25:99"}, "MESHPLAN_REPLAN_AT"),
    ({"MESHPLAN_REPLAN_TIMEZONE": "Mars/Olympus"}, "MESHPLAN_REPLAN_TIMEZONE"),
    ({"REDIS_URL": "notaurl"}, "REDIS_URL"),
]


@pytest.mark.parametrize(("env", "name"), BAD_SETTINGS, ids=lambda v: str(v)[:30])
@pytest.mark.parametrize("command", ["serve", "beat", "replan"])
def test_bad_settings_end_before_the_command_starts(
    command: str, env: dict[str, str], name: str, tmp_path: Path, no_server: None
) -> None:
    _one_line_exit_2([command], {"DATABASE_URL": f"sqlite:///{tmp_path / 'x.db'}", **env}, name)


def test_serve_refuses_a_port_out_of_range(no_server: None) -> None:
    for port in ("99999", "0", "-1"):
        _one_line_exit_2(["serve", "--port", port], {}, "Invalid value for '--port'")


def test_worker_with_a_bad_redis_url_exits_2(tmp_path: Path) -> None:
    """It used to print a traceback and exit 0 (a supervisor would not restart it)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MESHPLAN_")}
    env |= {"REDIS_URL": "notaurl", "DATABASE_URL": f"sqlite:///{tmp_path / 'w.db'}"}
    r = subprocess.run([MESHPLAN, "worker"], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stderr.startswith("error: REDIS_URL") and "Traceback" not in r.stderr, r.stderr


DATABASE_COMMANDS = [["token", "create", "--scope", "read"], ["token", "revoke", "1"], ["replan", "--now"]]


@pytest.mark.parametrize("args", DATABASE_COMMANDS)
def test_an_unmigrated_database_says_migrate(args: list[str], tmp_path: Path) -> None:
    result = RUNNER.invoke(app, args, env={"DATABASE_URL": f"sqlite:///{tmp_path / 'empty.db'}"})
    assert result.exit_code == 2, (result.output, result.exception)
    assert result.output.strip().splitlines() == [result.output.strip()] and "meshplan migrate" in result.output


def test_replan_now_uses_the_database_it_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The process's settings were read earlier with another DATABASE_URL (a migrated one, as `make run` leaves
    ./meshplan.db): `replan --now` re-plans the database its own settings name, not the cached one (issue 48 §3;
    it printed "no watch changed" from the other database and exited 0)."""
    from store.migrate import upgrade
    from store.settings import settings

    other = f"sqlite:///{tmp_path / 'users-own.db'}"
    upgrade(other)
    monkeypatch.setenv("DATABASE_URL", other)
    assert settings().database_url == other  # cached for the process
    result = RUNNER.invoke(app, ["replan", "--now"], env={"DATABASE_URL": f"sqlite:///{tmp_path / 'empty.db'}"})
    assert result.exit_code == 2 and "meshplan migrate" in result.output, (result.output, result.exception)


def test_an_unreachable_database_is_named_without_its_password() -> None:
    url = "postgresql+psycopg://u:hunter2@127.0.0.1:1/none"
    result = RUNNER.invoke(app, ["token", "create", "--scope", "read"], env={"DATABASE_URL": url})
    assert result.exit_code == 2, (result.output, result.exception)
    assert result.output.startswith("error: DATABASE_URL: cannot use") and "hunter2" not in result.output


@pytest.mark.parametrize(
    ("env", "name"),
    [
        ({"MESHPLAN_REPLAN_AT": "2:00"}, "MESHPLAN_REPLAN_AT"),
        ({"MESHPLAN_REPLAN_AT": "23:60"}, "MESHPLAN_REPLAN_AT"),
        ({"MESHPLAN_REPLAN_TIMEZONE": "../../etc/passwd"}, "MESHPLAN_REPLAN_TIMEZONE"),
        ({"REDIS_URL": "redis://u:hunter2@h:notaport/0"}, "REDIS_URL"),
        ({"REDIS_URL": "http://h:6379"}, "REDIS_URL"),
        ({"MESHPLAN_MAX_PAGE_SIZE": "0"}, "MESHPLAN_MAX_PAGE_SIZE"),
    ],
)
def test_load_settings_names_the_variable_in_one_line(env: dict[str, str], name: str) -> None:
    from optimizer.errors import DomainError
    from store.settings import load_settings

    with pytest.raises(DomainError) as caught:
        load_settings(env)
    assert caught.value.field == name and "\n" not in str(caught.value) and "hunter2" not in str(caught.value)


def test_load_settings_takes_good_values() -> None:
    from store.settings import load_settings

    good = {
        "MESHPLAN_REPLAN_AT": "23:59",
        "MESHPLAN_REPLAN_TIMEZONE": "Europe/Berlin",
        "REDIS_URL": "rediss://h:6380/1",
    }
    cfg = load_settings(good)
    assert (cfg.replan_at, cfg.replan_timezone, cfg.redis_url) == ("23:59", "Europe/Berlin", "rediss://h:6380/1")


def test_serve_without_migrating_an_empty_database_says_migrate(tmp_path: Path, no_server: None) -> None:
    result = RUNNER.invoke(app, ["serve", "--no-migrate"], env={"DATABASE_URL": f"sqlite:///{tmp_path / 'e.db'}"})
    assert result.exit_code == 2 and "meshplan migrate" in result.output, (result.output, result.exception)


def test_sync_on_an_unmigrated_database_says_migrate(tmp_path: Path) -> None:
    result = RUNNER.invoke(app, ["sync", "1"], env={"DATABASE_URL": f"sqlite:///{tmp_path / 'e.db'}"})
    assert result.exit_code == 2 and "meshplan migrate" in result.output, (result.output, result.exception)
