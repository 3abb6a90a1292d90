"""The service commands on the embedded defaults (a SQLite file, jobs in this process)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from optimizer.spec.model_loading import load_model_preset
from service.catalog import create_cluster, create_model
from store.db import Database
from store.repositories.paging import PageRequest
from store.repositories.plans import PlanFilter, PlanRepository
from store.repositories.tokens import TokenRepository
from tests.factories import small_cluster, training_watch

MESHPLAN = str(Path(sys.executable).parent / "meshplan")


def run(args: list[str], db_url: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MESHPLAN_") and k != "REDIS_URL"}
    env["DATABASE_URL"] = db_url
    return subprocess.run([MESHPLAN, *args], env=env, capture_output=True, text=True, timeout=300)


def test_migrate_token_and_replan_now(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}"
    assert run(["migrate"], url).returncode == 0
    made = run(["token", "create", "--scope", "read", "--name", "ci"], url)
    assert made.returncode == 0 and made.stdout.strip().startswith("mp_")
    bad = run(["token", "create", "--scope", "admin"], url)
    assert bad.returncode == 2 and "scope" in bad.stderr and "Traceback" not in bad.stderr
    db = Database(url)
    with db.session() as s:
        assert TokenRepository(s).authenticate(made.stdout.strip()) is not None
        cluster, _ = create_cluster(s, "lab", small_cluster(1))
        model, _ = create_model(s, "m", load_model_preset("llama-3-8b"))
        training_watch(s, cluster, model, "nightly")
    first = run(["replan", "--now"], url)
    assert first.returncode == 0 and "1 watch(es) changed" in first.stdout, first.stderr
    second = run(["replan", "--now"], url)
    assert second.returncode == 0 and "no watch changed" in second.stdout
    with db.session() as s:
        assert PlanRepository(s).history(PlanFilter(cluster_id=cluster.id), PageRequest()).total == 1
    db.dispose()


def test_bad_settings_and_missing_redis_exit_2(tmp_path: Path) -> None:
    r = run(["worker"], f"sqlite:///{tmp_path / 'w.db'}")
    assert r.returncode == 2 and "REDIS_URL" in r.stderr
    env_bad = run(["migrate"], "nosuchdb://x")
    assert env_bad.returncode == 2 and "DATABASE_URL" in env_bad.stderr and "Traceback" not in env_bad.stderr


def test_more_than_one_api_process_needs_redis(tmp_path: Path) -> None:
    """Embedded jobs run inside the one API process, so `serve --workers 2` without REDIS_URL is refused."""
    r = run(["serve", "--workers", "2", "--port", "1"], f"sqlite:///{tmp_path / 's.db'}")
    assert r.returncode == 2 and "--workers" in r.stderr and "REDIS_URL" in r.stderr and "Traceback" not in r.stderr
