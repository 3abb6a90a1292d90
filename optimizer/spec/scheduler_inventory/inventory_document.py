"""A cluster inventory document from a scheduler's nodes: pools by GPU type, nodes with their states, switches and
NVLink domains, and the switch levels mapped to the pool's tiers as far as the cost model has them.

The cost model prices a pool's network as one tier inside a pod (`pod_size` nodes under a non-blocking switch)
and one above it (`oversubscription`) [optimizer/costmodel/network.py pool_tiers]. So the leaf switch level sets
`pod_size` (nodes per leaf, when every leaf holds as many), every level above the leaf is the one inter-pod tier,
and each node keeps its whole switch path (`Node.switches`) for placement. Neither Slurm nor Kubernetes reports
link rates or oversubscription (topology.conf's LinkSpeed "is currently not used"): those, and the NICs, come
from the cluster's previous revision, else from the import's defaults, and the notes say which.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from optimizer.errors import DomainError
from optimizer.spec.cluster_loading import build_cluster
from optimizer.spec.cluster_spec import ClusterSpec, NodePool
from optimizer.spec.gpu_catalog import GPUSpec, resolve_gpu
from optimizer.spec.scheduler_inventory.records import ScheduledNode, SchedulerInventory

BLOCK_SOURCE = "Slurm topology block"


class ImportDefaults(BaseModel):
    """What a new pool gets where the scheduler says nothing (NICs)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    nic_gbps: float = Field(default=400.0, gt=0, le=100_000, description="Line rate of one data NIC, Gb/s.")
    nics_per_node: int | None = Field(
        default=None, ge=0, le=64, description="Data NICs per node; None: one per GPU (rail-optimized DGX/HGX)."
    )


@dataclass
class ClusterImport:
    """The inventory document and what the import assumed or left out."""

    document: dict[str, Any]
    notes: list[str] = field(default_factory=list)


def natural_key(name: str) -> list[object]:
    """gpu2 before gpu10."""
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name)]


def _slug(gpu: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", gpu).strip("-").lower()[:56] or "pool"


def _place_domains(
    nodes: list[ScheduledNode], gpus: dict[str, GPUSpec], notes: list[str]
) -> list[tuple[ScheduledNode, str | None]]:
    """Each node with its NVLink domain: a scheduler group counts as one only where the GPU's NVLink reaches beyond
    a node (GB200/GB300 NVL72); elsewhere a Slurm block is the leaf switch level and other groups are dropped."""
    out: list[tuple[ScheduledNode, str | None]] = []
    as_leaf: set[str] = set()
    dropped: Counter[str] = Counter()
    for n in nodes:
        if n.domain is None:
            out.append((n, None))
            continue
        if gpus[n.gpu].scaleup_domain > n.gpus:
            out.append((n, n.domain))
        elif n.domain_source == BLOCK_SOURCE and not n.switches:
            out.append((n.model_copy(update={"switches": [n.domain]}), None))
            as_leaf.add(n.gpu)
        else:
            out.append((n, None))
            dropped[f"{n.domain_source} on {n.gpu}"] += 1
    for gpu in sorted(as_leaf):
        notes.append(f"{gpu}: NVLink stays inside a node, so Slurm blocks are read as leaf switches")
    for what, count in sorted(dropped.items()):
        notes.append(f"{what} ignored on {count} node(s): NVLink stays inside a node")
    return out


def _base_pool_of(base: ClusterSpec | None) -> tuple[dict[str, NodePool], list[NodePool]]:
    """The previous revision's pool of each listed node name, and its pools in order."""
    if base is None:
        return {}, []
    by_node = {n.name: p for p in base.pools if isinstance(p.nodes, list) for n in p.nodes}
    return by_node, list(base.pools)


def _pool_for(
    node: ScheduledNode, by_node: dict[str, NodePool], base_pools: list[NodePool], base: ClusterSpec | None
) -> NodePool | None:
    """The previous revision's pool a node belongs to: the one that held it, else the first of its GPU type and
    size (pool names, NICs, prices and oversubscription carry over)."""
    if base is None:
        return None

    def fits(p: NodePool) -> bool:
        return p.gpus_per_node == node.gpus and base.gpu_of(p).name == node.gpu

    held = by_node.get(node.name) or next(
        (p for p in base_pools if isinstance(p.nodes, int) and p.has_node(node.name)), None
    )
    if held is not None and fits(held):
        return held
    return next((p for p in base_pools if fits(p)), None)


def _leaf_tier(name: str, nodes: list[dict[str, Any]], template: NodePool | None, notes: list[str]) -> int | None:
    """pod_size from the leaf switches (nodes per leaf when uniform), with a note mapping levels to tiers."""
    keep = template.pod_size if template is not None else None
    placed = [n for n in nodes if n.get("switches")]
    if not placed:
        notes.append(f"{name}: no switches known" + (f"; pod_size {keep} kept" if keep else ""))
        return keep
    levels = max(len(n["switches"]) for n in placed)
    per_leaf = Counter(n["switches"][0] for n in placed)
    sizes = sorted(set(per_leaf.values()))
    if len(placed) < len(nodes):
        notes.append(
            f"{name}: {len(nodes) - len(placed)} of {len(nodes)} nodes have no switch: pod_size "
            + (f"{keep} kept" if keep else "unset")
        )
        return keep
    if len(sizes) > 1:
        notes.append(
            f"{name}: leaf switches hold {', '.join(map(str, sizes))} nodes, not one size: pod_size "
            + (f"{keep} kept" if keep else "unset")
            + " (the cost model takes one pod size per pool; each node keeps its switches)"
        )
        return keep
    over = template.oversubscription if template is not None else 1.0
    text = (
        f"{name}: {levels} switch level(s); {len(per_leaf)} leaf switch(es) of {sizes[0]} nodes -> pod_size {sizes[0]}"
    )
    if levels > 1:
        text += f"; the levels above the leaf are the inter-pod tier (oversubscription {over:g}"
        text += ", which the scheduler does not report)"
    if levels > 2:
        upper = "level 3" if levels == 3 else f"levels 3-{levels}"
        text += f"; {upper} stay on the nodes only (the cost model has one tier above the pod)"
    notes.append(text)
    return sizes[0]


def _nvlink_domain_size(
    name: str, nodes: list[dict[str, Any]], gpu: GPUSpec, gpn: int, keep: int | None, notes: list[str]
) -> int | None:
    """GPUs per NVLink domain from the nodes sharing one (when every domain holds as many nodes); otherwise `keep`
    (the previous revision's), None leaving the GPU type's own."""
    per_domain = Counter(n["nvlink_domain"] for n in nodes if n.get("nvlink_domain"))
    if not per_domain:
        return keep
    lacking = sum(1 for n in nodes if not n.get("nvlink_domain"))
    if lacking:
        notes.append(f"{name}: {lacking} node(s) report no NVLink domain (each is its own)")
    sizes = sorted(set(per_domain.values()))
    left = f"domain_size {keep} kept" if keep else f"domain_size left at {gpu.name}'s {gpu.scaleup_domain} GPUs"
    if len(sizes) > 1:
        notes.append(f"{name}: NVLink domains hold {', '.join(map(str, sizes))} nodes, not one size: {left}")
        return keep
    size = sizes[0] * gpn
    if size > gpu.scaleup_domain:
        notes.append(
            f"{name}: {sizes[0]} nodes share an NVLink domain ({size} GPUs), beyond {gpu.name}'s "
            f"{gpu.scaleup_domain}: {left}"
        )
        return keep
    notes.append(f"{name}: {len(per_domain)} NVLink domain(s) of {sizes[0]} nodes -> domain_size {size} GPUs")
    return size


def cluster_document(
    inventory: SchedulerInventory,
    name: str,
    base: ClusterSpec | None = None,
    defaults: ImportDefaults | None = None,
    custom: dict[str, GPUSpec] | None = None,
) -> ClusterImport:
    """The inventory document of a scheduler's GPU nodes (pools by GPU type and GPUs per node), validated. Pool
    settings the scheduler does not know (names, NICs, prices, oversubscription) carry over from `base`; the
    nodes' GPU types are the catalog's, `base`'s own or `custom` (the user-defined types they were read with)."""
    defaults = defaults or ImportDefaults()
    notes: list[str] = [f"read from {inventory.source}"]
    for reason, names in inventory.ignored.items():
        notes.append(f"{len(names)} node(s) {reason} ignored, e.g. {', '.join(sorted(names, key=natural_key)[:3])}")
    if not inventory.nodes:
        raise DomainError(
            "nodes", f"no GPU nodes in {inventory.source} ({sum(map(len, inventory.ignored.values()))} ignored)"
        )
    custom = {**(custom or {}), **({g.name: g for g in base.gpu_types} if base is not None else {})}
    gpus = {n.gpu: resolve_gpu(n.gpu, custom) for n in inventory.nodes}
    placed = _place_domains(sorted(inventory.nodes, key=lambda n: natural_key(n.name)), gpus, notes)
    by_node, base_pools = _base_pool_of(base)
    pools: dict[str, tuple[NodePool | None, str, int, list[dict[str, Any]]]] = {}
    for node, domain in placed:
        template = _pool_for(node, by_node, base_pools, base)
        pool_name = template.name if template is not None else _slug(node.gpu)
        if (
            template is None
            and pool_name in pools
            and (pools[pool_name][1], pools[pool_name][2]) != (node.gpu, node.gpus)
        ):
            pool_name = f"{pool_name}-{node.gpus}gpu"
        entry: dict[str, Any] = {"name": node.name}
        if node.state != "healthy":
            entry["state"] = node.state
        if node.switches:
            entry["switches"] = node.switches
        if domain is not None:
            entry["nvlink_domain"] = domain
        gpu_name = template.gpu if template is not None else node.gpu
        pools.setdefault(pool_name, (template, gpu_name, node.gpus, []))[3].append(entry)
    docs: list[dict[str, Any]] = []
    for pool_name, (template, gpu_name, gpn, nodes) in pools.items():
        gpu = resolve_gpu(gpu_name, custom)
        doc: dict[str, Any] = (
            template.model_dump(mode="json", exclude_none=True, exclude={"nodes", "node_states", "pod_size"})
            if template is not None
            else {
                "name": pool_name,
                "gpu": gpu.name,
                "gpus_per_node": gpn,
                "inter_node": {
                    "nics_per_node": defaults.nics_per_node if defaults.nics_per_node is not None else gpn,
                    "gbits_per_s": defaults.nic_gbps,
                },
            }
        )
        doc["nodes"] = nodes
        pod = _leaf_tier(pool_name, nodes, template, notes)
        if pod is not None:
            doc["pod_size"] = pod
        kept = template.intra_node.domain_size if template is not None and template.intra_node else None
        domain_size = _nvlink_domain_size(pool_name, nodes, gpu, gpn, kept, notes)
        if domain_size is not None:
            doc["intra_node"] = {**doc.get("intra_node", {"kind": "nvlink"}), "domain_size": domain_size}
        states = Counter(n.get("state", "healthy") for n in nodes)
        counts = ", ".join(f"{v} {k}" for k, v in sorted(states.items()))
        origin = (
            "as before"
            if template is not None
            else f"assumed {doc['inter_node']['nics_per_node']} x {doc['inter_node']['gbits_per_s']:g} Gb/s"
        )
        notes.append(f"{pool_name}: {len(nodes)} nodes x {gpn} {gpu.name} ({counts}); NICs {origin}")
        docs.append(doc)
    document: dict[str, Any] = {"name": name, "pools": docs}
    used = {resolve_gpu(str(p["gpu"]), custom).name for p in docs}
    own = [g.model_dump(mode="json") for name, g in custom.items() if name in used]
    if own:
        document["gpu_types"] = own
    document["name"] = build_cluster(document).name
    return ClusterImport(document=document, notes=notes + list(inventory.notes))
