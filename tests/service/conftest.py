"""The real Slurm cluster the scheduler-sync tests read (one per test session, torn down after)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.databases import require
from tests.slurm_cluster import SlurmCluster, missing_programs, slurm_cluster


@pytest.fixture(scope="session")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    """slurmctld, one slurmd and munged on localhost with their own configuration (`make slurm` installs them;
    under CI=true a missing Slurm fails the tests that need it)."""
    missing = missing_programs()
    if missing:
        require(f"Slurm is not installed (no {', '.join(missing)}; `make slurm` installs slurm-wlm and munge)")
    with slurm_cluster(tmp_path_factory.mktemp("slurm")) as cluster:
        yield cluster
