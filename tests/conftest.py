"""Shared fixtures: specs, and the store's databases (both backends, migrated by Alembic) for the store and
service tests."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session

import store.db
from optimizer.spec.cluster_loading import load_cluster_preset
from optimizer.spec.cluster_spec import ClusterSpec
from optimizer.spec.model_loading import load_model_preset
from optimizer.spec.model_spec import ModelSpec
from store.db import Database
from store.migrate import upgrade
from store.settings import settings
from tests.databases import migrated_pg_database, require
from tests.slurm_cluster import SlurmCluster, missing_programs, slurm_cluster

# Code the tests run in this process (the CLI through typer's runner, apps made from the environment's settings) runs
# embedded jobs on a thread: a child process spawned inside an xdist worker hung the parallel pass in a fresh clone.
# Servers the tests start as processes get a clean environment (tests/test_readme.py clean_env) and so the default,
# a child process, which tests/workers/test_embedded_job_process.py also tests directly.
os.environ.setdefault("MESHPLAN_EMBEDDED_JOBS", "thread")

ROOT = Path(__file__).resolve().parent.parent
USER_FILES = tuple(ROOT / name for name in ("meshplan.db", "meshplan.db-wal", "meshplan.db-shm"))
"""The user's own database in the checkout (`make run` creates it): no test may open, create or change it
[issue 47 §4, issue 48 §3]."""


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return st.st_mtime_ns, st.st_size


def _is_user_database(url: str) -> bool:
    parsed = make_url(url)
    return (
        parsed.get_backend_name() == "sqlite"
        and bool(parsed.database)
        and (Path(str(parsed.database)).resolve() == USER_FILES[0])
    )


@pytest.fixture(autouse=True)
def own_files_and_no_process_caches(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every test starts and ends without the process's cached settings or the engines it opened, and fails if
    it opened the checkout's ./meshplan.db (in this process) or created or changed it (any process)."""
    settings.cache_clear()
    before = {p: _stamp(p) for p in USER_FILES}
    engines = dict(store.db._databases)
    opened: list[str] = []
    make_engine = store.db.make_engine

    def guarded(url: str) -> Engine:
        if _is_user_database(url):
            opened.append(url)
            raise AssertionError(f"a test opened the user's own database {url} (cached settings?)")
        return make_engine(url)

    monkeypatch.setattr(store.db, "make_engine", guarded)
    yield
    settings.cache_clear()
    for key in [k for k in store.db._databases if k not in engines]:
        store.db._databases.pop(key).dispose()
    assert not opened, f"the test opened {opened}"
    after = {p: _stamp(p) for p in USER_FILES}
    changed = [p.name for p in USER_FILES if before[p] != after[p] and p.name == "meshplan.db"]
    assert not changed, f"the test created or changed the checkout's {changed}"


@pytest.fixture(scope="session")
def llama70b() -> ModelSpec:
    return load_model_preset("llama-2-70b")


@pytest.fixture(scope="session")
def two_dgx_h100() -> ClusterSpec:
    return load_cluster_preset("two-dgx-h100")


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    with migrated_pg_database() as url:
        yield url


@pytest.fixture(scope="session")
def sqlite_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{Path(tmp_path_factory.mktemp('db')) / 'meshplan.db'}"
    upgrade(url)
    return url


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request: pytest.FixtureRequest) -> Iterator[Database]:
    url = request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "pg_url")
    database = Database(url)
    yield database
    database.dispose()


@pytest.fixture
def session(db: Database) -> Iterator[Session]:
    """A session inside an outer transaction that is rolled back: nothing a test writes survives it."""
    with db.engine.connect() as conn:
        outer = conn.begin()
        s = Session(bind=conn, join_transaction_mode="create_savepoint", expire_on_commit=False)
        try:
            yield s
        finally:
            s.close()
            outer.rollback()


@pytest.fixture(scope="session")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    """slurmctld, one slurmd and munged on localhost with their own configuration, torn down after the session
    (`make slurm` installs them; under CI=true a missing Slurm fails the tests that need it)."""
    missing = missing_programs()
    if missing:
        require(f"Slurm is not installed (no {', '.join(missing)}; `make slurm` installs slurm-wlm and munge)")
    root = tmp_path_factory.mktemp("slurm")
    # The operator lets the server read the test cluster's files (MESHPLAN_SYNC_FILE_DIRS; none by default).
    before = os.environ.get("MESHPLAN_SYNC_FILE_DIRS")
    os.environ["MESHPLAN_SYNC_FILE_DIRS"] = str(root)
    try:
        with slurm_cluster(root) as cluster:
            yield cluster
    finally:
        if before is None:
            os.environ.pop("MESHPLAN_SYNC_FILE_DIRS", None)
        else:
            os.environ["MESHPLAN_SYNC_FILE_DIRS"] = before


# Tests that run in the serial pass of `make test` (the rest run on both cores, pytest-xdist): real worker processes
# on one Redis database (tests/workers), browsers and servers on ports (tests/pages, tests/deploy), the Slurm
# controller, and tests that bound a wall time (a solver cancelled within a second, a test clock) which a busy
# second core would distort.
SERIAL_PATHS = (
    "tests/workers/",
    "tests/pages/",
    "tests/deploy/",
    "tests/service/test_scheduler_sync_slurm.py",
    "tests/service/test_jobs.py",
    "tests/service/test_deleted_jobs_stop.py",
    "tests/store/test_changes.py",
    "tests/api/test_token_use.py",
    "tests/api/test_commit_before_answer.py",
    "tests/api/test_openapi_stateful.py",
    "tests/api/test_cli_every_option.py",
    "tests/optimizer/costmodel/test_engine_step.py",
)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "serial: runs in make test's one-process pass (see SERIAL_PATHS)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    root = Path(str(config.rootpath))
    for item in items:
        rel = Path(str(item.path)).relative_to(root).as_posix()
        if rel.startswith(SERIAL_PATHS):
            item.add_marker(pytest.mark.serial)
