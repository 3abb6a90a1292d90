"""Kubernetes' node inventory: `kubectl get nodes -o json` (a v1 List or NodeList of Node objects).

What is read, and from where:
  GPU type, count and memory: GPU Feature Discovery's labels `nvidia.com/gpu.product` (the device name with spaces
    as hyphens, `-SHARED` appended under time-slicing, `-MIG-<profile>` under the single MIG strategy),
    `nvidia.com/gpu.count` and `nvidia.com/gpu.memory` (MiB) [NVIDIA/k8s-device-plugin
    docs/gpu-feature-discovery/README.md "Generated Labels"; internal/lm/resource.go getProductName]; the count
    falls back to `status.capacity["nvidia.com/gpu"]`.
  NVLink domain: `nvidia.com/gpu.clique` (GPU fabric ClusterUUID.CliqueID, set on multi-node NVLink systems such as
    GB200 NVL72 [same README; internal/lm/imex.go]), else Topograph's `accelerator.topograph.run/domain`.
  Switches, leaf first: Topograph's `fabric.topograph.run/tier-N` (tier 0 closest to the node) [NVIDIA/topograph
    docs/reference/node-labels.md], its earlier `network.topology.nvidia.com/{leaf,spine,core}` keys, or the labels a
    Kueue Topology names (given explicitly, lowest level above the host first).
  Health: `spec.unschedulable` (cordoned: drained) and the `Ready` condition (not True: failed) [Kubernetes API
    reference, Node v1: NodeSpec.unschedulable, NodeStatus.conditions].
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from optimizer.errors import DomainError
from optimizer.spec.cluster_spec import NodeState
from optimizer.spec.gpu_catalog import GPUSpec, resolve_gpu
from optimizer.spec.scheduler_inventory.records import (
    ScheduledNode,
    SchedulerInventory,
    as_list,
    as_object,
    unknown_gpu,
)
from optimizer.spec.yaml_documents import document_mapping

PRODUCT = "nvidia.com/gpu.product"
COUNT = "nvidia.com/gpu.count"
MEMORY = "nvidia.com/gpu.memory"
CLIQUE = "nvidia.com/gpu.clique"
GPU_RESOURCE = "nvidia.com/gpu"
TOPOGRAPH_TIER = re.compile(r"^fabric\.topograph\.run/tier-(\d+)$")
TOPOGRAPH_DOMAIN = "accelerator.topograph.run/domain"
# Topograph before its topograph.run labels (CHANGELOG: "The fixed leaf, spine, and core keys ... are replaced").
LEGACY_TOPOGRAPH = (
    "network.topology.nvidia.com/leaf",
    "network.topology.nvidia.com/spine",
    "network.topology.nvidia.com/core",
)
HOSTNAME = "kubernetes.io/hostname"  # a Kueue Topology's lowest level is often the node itself: not a switch
# A catalog type whose memory differs from GFD's figure by more than this is another variant (A100 40 vs 80 GB).
MEMORY_TOLERANCE = 0.10
MIB_PER_GIB = 1024


class KubernetesLabels(BaseModel):
    """Which node labels carry the network topology and the NVLink domain."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    fabric: list[str] | None = Field(
        default=None,
        max_length=8,
        description="Label keys of the switch levels, lowest (leaf) first, e.g. a Kueue Topology's levels; None: "
        "Topograph's fabric.topograph.run/tier-N, else its earlier network.topology.nvidia.com/leaf,spine,core.",
    )
    domain: list[str] = Field(
        default_factory=lambda: [CLIQUE, TOPOGRAPH_DOMAIN],
        max_length=8,
        description="Label keys naming a node's NVLink domain, the first present wins.",
    )


def _fabric_keys(items: list[dict[str, str]], labels: KubernetesLabels) -> tuple[list[str], str]:
    """The switch label keys in use, leaf first, and the scheme's name."""
    if labels.fabric is not None:
        return [k for k in labels.fabric if k != HOSTNAME], "the given labels"
    tiers = {int(m.group(1)) for lab in items for k in lab if (m := TOPOGRAPH_TIER.match(k))}
    if tiers:
        return [f"fabric.topograph.run/tier-{t}" for t in range(max(tiers) + 1)], "Topograph fabric tiers"
    if any(k in lab for lab in items for k in LEGACY_TOPOGRAPH):
        return list(LEGACY_TOPOGRAPH), "Topograph leaf/spine/core labels"
    return [], ""


def _labels(obj: dict[str, Any], i: int) -> dict[str, str]:
    meta = obj.get("metadata")
    labels = meta.get("labels") if isinstance(meta, dict) else None
    if labels is None:
        return {}
    if not isinstance(labels, dict):
        raise DomainError(f"items[{i}].metadata.labels", "must be a mapping of strings")
    return {str(k): str(v) for k, v in labels.items()}


def _int_label(value: str | None, field: str) -> int | None:
    if value is None or value == "":
        return None
    if not value.isascii() or not value.isdigit() or len(value) > 9:
        raise DomainError(field, f"must be a whole number (got {value[:40]!r})")
    return int(value)


def health(obj: dict[str, Any]) -> tuple[NodeState, str]:
    """healthy, drained (cordoned) or failed (not Ready), with the reason in Kubernetes' words."""
    spec = as_object(obj.get("spec"))
    conditions = as_list(as_object(obj.get("status")).get("conditions"))
    ready = next((c for c in conditions if isinstance(c, dict) and c.get("type") == "Ready"), None)
    if ready is None or ready.get("status") != "True":
        said = "no Ready condition" if ready is None else f"Ready={ready.get('status')}"
        reason = ready.get("reason") if ready else None
        return "failed", said + (f" ({reason})" if reason else "")
    if spec.get("unschedulable") is True:
        return "drained", "cordoned (spec.unschedulable)"
    return "healthy", ""


def _gpu(product: str, memory_mib: int | None, custom: dict[str, GPUSpec] | None, field: str) -> GPUSpec | None:
    """The catalog type of a GFD product label, with GFD's memory figure choosing among variants."""
    names = [product]
    if memory_mib:  # "NVIDIA-A100-PCIE" + 40 GB: the catalog's variant with the memory in its name
        names.append(f"{product}-{round(memory_mib / MIB_PER_GIB)}GB")
    found: list[GPUSpec] = []
    for name in names:
        try:
            found.append(resolve_gpu(name, custom, field))
        except DomainError:
            continue
    if not found:
        return None
    if memory_mib:
        gib = memory_mib / MIB_PER_GIB
        close = [g for g in found if abs(g.memory_gib - gib) <= MEMORY_TOLERANCE * g.memory_gib]
        return close[0] if close else found[0]
    return found[0]


def kubernetes_inventory(
    nodes_json: str,
    labels: KubernetesLabels | None = None,
    custom: dict[str, GPUSpec] | None = None,
    source: str = "kubectl get nodes -o json",
) -> SchedulerInventory:
    """The GPU nodes of a Kubernetes cluster with their GPU type, state and place in the topology."""
    labels = labels or KubernetesLabels()
    doc = document_mapping(nodes_json, "nodes", source, "(a v1 List of Node objects)", "JSON")
    items = doc.get("items") if doc.get("kind") != "Node" else [doc]
    if not isinstance(items, list):
        raise DomainError("nodes", f"{source} has no `items` list (expected `kubectl get nodes -o json` output)")
    for i, obj in enumerate(items):
        meta = obj.get("metadata") if isinstance(obj, dict) else None
        if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
            raise DomainError(f"items[{i}].metadata.name", "every Node needs a name")
    all_labels = [_labels(obj, i) for i, obj in enumerate(items)]
    fabric, scheme = _fabric_keys(all_labels, labels)
    seen: set[str] = set()
    out: list[ScheduledNode] = []
    ignored: dict[str, list[str]] = {}
    notes: list[str] = []
    short: list[str] = []
    for obj, lab in zip(items, all_labels, strict=True):
        name = obj["metadata"]["name"]
        if name in seen:
            raise DomainError("nodes", f"duplicate node name {name} in {source}")
        seen.add(name)
        field = f"nodes.{name}"
        capacity = as_object(as_object(obj.get("status")).get("capacity"))
        count = _int_label(lab.get(COUNT), f"{field}.labels.{COUNT}")
        if count is None:
            count = _int_label(str(capacity.get(GPU_RESOURCE, "")) or None, f"{field}.status.capacity.{GPU_RESOURCE}")
        product = lab.get(PRODUCT)
        if count is None and product is not None:
            raise DomainError(f"{field}.labels.{COUNT}", f"{PRODUCT}={product} but no GPU count (label or capacity)")
        if not count:
            ignored.setdefault("without GPUs", []).append(name)
            continue
        if product is None:
            raise DomainError(
                f"{field}.labels.{PRODUCT}",
                f"{count} {GPU_RESOURCE} but no {PRODUCT} label (is GPU Feature Discovery running?)",
            )
        if "-MIG-" in product.upper():
            ignored.setdefault("with MIG-partitioned GPUs", []).append(name)
            continue
        memory = _int_label(lab.get(MEMORY), f"{field}.labels.{MEMORY}")
        bare = re.sub(r"-SHARED$", "", product, flags=re.IGNORECASE)  # time-slicing's rename, same physical GPUs
        gpu = _gpu(bare, memory, custom, f"{field}.labels.{PRODUCT}")
        if gpu is None:
            read = f"label {PRODUCT}={product}" + (f" ({memory} MiB)" if memory else "")
            raise unknown_gpu(f"{field}.labels.{PRODUCT}", f"node {name}: {read}", custom)
        state, why = health(obj)
        switches: list[str] = []
        for key in fabric:
            if key not in lab:
                break
            switches.append(lab[key])
        if len(switches) < len(fabric):
            short.append(name)
        domain_key = next((k for k in labels.domain if lab.get(k)), None)
        out.append(
            ScheduledNode(
                name=name,
                gpu=gpu.name,
                gpus=count,
                state=state,
                why=why[:200],
                switches=switches,
                domain=lab[domain_key] if domain_key else None,
                domain_source=domain_key or "",
            )
        )
    if scheme:
        notes.append(f"switches from {scheme}: {', '.join(fabric)}")
    else:
        notes.append("no topology labels found (Topograph or --fabric-labels): nodes carry no switches")
    if short:
        notes.append(f"{len(short)} node(s) carry fewer switch levels than others, e.g. {short[0]}")
    return SchedulerInventory(source=f"Kubernetes {source}", nodes=out, ignored=ignored, notes=notes)
