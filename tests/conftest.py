"""Shared fixtures: specs, and the store's databases (both backends, migrated by Alembic) for the store and
service tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.orm import Session

from optimizer.spec.cluster_loading import load_cluster_preset
from optimizer.spec.cluster_spec import ClusterSpec
from optimizer.spec.model_loading import load_model_preset
from optimizer.spec.model_spec import ModelSpec
from store.db import Database
from store.migrate import upgrade
from tests.databases import migrated_pg_database, require
from tests.slurm_cluster import SlurmCluster, missing_programs, slurm_cluster


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
    with slurm_cluster(tmp_path_factory.mktemp("slurm")) as cluster:
        yield cluster
