"""Shared fixtures."""

from __future__ import annotations

import pytest

from optimizer.spec.cluster_loading import load_cluster_preset
from optimizer.spec.cluster_spec import ClusterSpec
from optimizer.spec.model_loading import load_model_preset
from optimizer.spec.model_spec import ModelSpec


@pytest.fixture(scope="session")
def llama70b() -> ModelSpec:
    return load_model_preset("llama-2-70b")


@pytest.fixture(scope="session")
def two_dgx_h100() -> ClusterSpec:
    return load_cluster_preset("two-dgx-h100")
