"""docker-compose.yml (no Docker engine here): every service's command exists in the project, the environment
variables are settings the service reads, and the long-running services have health checks."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from store.settings import Settings, env_name, load_settings

ROOT = Path(__file__).resolve().parents[2]
MESHPLAN = str(Path(sys.executable).parent / "meshplan")
COMPOSE: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
OURS = ("migrate", "api", "worker", "beat")


def test_services_are_all_there() -> None:
    assert set(COMPOSE["services"]) == {"postgres", "redis", "migrate", "api", "worker", "beat"}
    for name in ("postgres", "redis", "api", "worker", "beat"):
        assert COMPOSE["services"][name].get("healthcheck"), name
    assert COMPOSE["services"]["api"]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"


def test_every_command_exists_in_the_project() -> None:
    for name in OURS:
        cmd = COMPOSE["services"][name]["command"]
        assert cmd[0] == "meshplan", name
        run = subprocess.run([MESHPLAN, *cmd[1:2], "--help"], capture_output=True, text=True, timeout=60)
        assert run.returncode == 0, (name, run.stderr)
        for opt in (c for c in cmd[2:] if c.startswith("--")):
            assert opt in run.stdout, (name, opt)
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert '"meshplan", "serve"' in dockerfile


def test_environment_matches_the_settings() -> None:
    known = {env_name(f) for f in Settings.model_fields}
    for name in OURS:
        env = COMPOSE["services"][name]["environment"]
        assert set(env) <= known, (name, set(env) - known)
        assert {"DATABASE_URL", "REDIS_URL"} <= set(env)
        cfg = load_settings({k: str(v) for k, v in env.items()})  # every value parses
        assert cfg.redis_url == "redis://redis:6379/0" and cfg.database_url.startswith("postgresql+psycopg://")
    pg = COMPOSE["services"]["postgres"]["environment"]
    url = COMPOSE["services"]["api"]["environment"]["DATABASE_URL"]
    assert f"{pg['POSTGRES_USER']}:{pg['POSTGRES_PASSWORD']}@postgres:5432/{pg['POSTGRES_DB']}" in url


def test_dockerfile_copies_what_the_commands_need() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    for folder in ("optimizer", "store", "api", "workers", "migrations", "alembic.ini"):
        assert folder in dockerfile, folder
