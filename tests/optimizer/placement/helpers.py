"""Inventories the placement tests share: GB200 NVL racks (4-GPU trays, 16 per 64-GPU NVLink domain), healthy or
with one tray drained in each rack."""

from __future__ import annotations

from typing import Any

from optimizer.spec.cluster_loading import build_cluster
from optimizer.spec.cluster_spec import ClusterSpec

# One tray drained in each of the four racks: 15 healthy trays per 64-GPU domain, so 8-GPU TP groups (two trays)
# leave one tray over in each rack.
ONE_PER_RACK = {"nvl-003": "drained", "nvl-020": "drained", "nvl-037": "drained", "nvl-054": "drained"}
# The same number of healthy trays, all lost from the last rack: every other rack is whole.
LAST_RACK = {"nvl-060": "drained", "nvl-061": "drained", "nvl-062": "drained", "nvl-063": "drained"}


def nvl_pool(states: dict[str, str] | None = None, **pool: Any) -> dict[str, Any]:
    """The pool document of 64 GB200 trays (pool `nvl`) in four NVL racks (domain_size 64) on one non-blocking
    network; `states`: node states; `pool`: other pool fields (pod_size and oversubscription for leaf switches)."""
    return {
        "gpu": "GB200-186GB",
        "nodes": 64,
        "gpus_per_node": 4,
        "intra_node": {"kind": "nvlink", "gbytes_per_s": 900, "domain_size": 64},
        "inter_node": {"nics_per_node": 4, "gbits_per_s": 400},
        "node_states": states or {},
        **pool,
        "name": "nvl",
    }


def nvl_racks(states: dict[str, str] | None = None, **pool: Any) -> ClusterSpec:
    """The racks of `nvl_pool` as a cluster."""
    return build_cluster({"name": "gb200", "pools": [nvl_pool(states, **pool)]})
