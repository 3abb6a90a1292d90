"""Slurm's node inventory: `sinfo --json` (Slurm 22.05 and later) or `scontrol show nodes --json` (23.02 and later).

The shapes, from Slurm's own serializers [SchedMD/slurm]:
  22.05 sinfo --json (openapi v0.0.38, src/plugins/openapi/v0.0.38): {"nodes": [{"name", "state": "idle",
        "state_flags": ["DRAIN", ...], "gres": "gpu:h100:8", "features": "a,b", "reason", ...}]};
  23.02+ scontrol show nodes --json (data_parser v0.0.39+, PARSER_ARRAY(NODE)): {"nodes": [{"name",
        "state": ["IDLE", "DRAIN"], "gres", "features": ["a", "b"] or "a,b", "reason", ...}]};
  23.02+ sinfo --json (PARSER_ARRAY(SINFO_DATA)): {"sinfo": [{"node": {"state": [...]}, "nodes": {"nodes":
        ["gpu01", ...]}, "gres": {"total": "gpu:h100:8(S:0-1)"}, "features": {"total", "active"}, "reason":
        {"description"}}]}, one record per group of alike nodes in a partition (a node in two partitions is in two).
A node's state is its base state plus flags [NODE_STATES flag table, data_parser parsers.c; node_state_flags in
slurm_protocol_defs.c]: a drained idle node is IDLE with DRAIN, a draining one ALLOCATED or MIXED with DRAIN.

GRES strings are `name[:type][:count][(S:sockets)]`, comma-separated [gres.conf(5)]; with AutoDetect=nvml the type
is NVML's device name lower-cased with underscores (`gpu:nvidia_h100_80gb_hbm3:4(S:0)`), which the GPU catalog's
spelling rules read as nvidia-smi's names are read.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from optimizer.errors import DomainError
from optimizer.spec.cluster_spec import NodeState
from optimizer.spec.gpu_catalog import GPUSpec, canonical_gpu_name
from optimizer.spec.scheduler_inventory.gpu_variant import GpuChoice, assumption_note, choose
from optimizer.spec.scheduler_inventory.records import (
    ScheduledNode,
    SchedulerInventory,
    SchedulerReportedError,
    as_list,
    as_object,
    resolve_scheduler_gpu,
    unknown_gpu,
)
from optimizer.spec.scheduler_inventory.topology_conf import SlurmTopology
from optimizer.spec.yaml_documents import document_mapping

# Not healthy, whatever the base state says [the list; flag names from slurm_protocol_defs.c]:
# failed: the node is down or cannot be reached or trusted (DOWN/ERROR base, FAIL = failing, NOT_RESPONDING,
# INVALID_REG = slurmd registered less than configured, UNKNOWN = slurmctld has not heard from it yet);
# drained: taken out of scheduling by an administrator or a maintenance reservation (DRAIN covers drained and
# draining), or rebooting now (REBOOT_ISSUED).
FAILED_BASES = frozenset({"DOWN", "ERROR", "UNKNOWN"})
FAILED_FLAGS = frozenset({"FAIL", "NOT_RESPONDING", "INVALID_REG"})
DRAINED_FLAGS = frozenset({"DRAIN", "MAINTENANCE", "REBOOT_ISSUED"})
# A FUTURE node is declared but not yet in the cluster: left out and counted.
FUTURE = "FUTURE"
BASES = frozenset({"IDLE", "ALLOCATED", "MIXED", "DOWN", "ERROR", "UNKNOWN", FUTURE})


@dataclass(frozen=True)
class SlurmNode:
    """One node as Slurm's JSON shows it (any version)."""

    name: str
    states: tuple[str, ...]  # base state and flags, upper case
    gres: str
    features: tuple[str, ...]
    reason: str


def node_state(states: Iterable[str]) -> NodeState:
    """healthy, drained or failed from a node's base state and flags (failed wins over drained)."""
    s = {x.upper() for x in states}
    if s & FAILED_BASES or s & FAILED_FLAGS:
        return "failed"
    if s & DRAINED_FLAGS:
        return "drained"
    return "healthy"


def _split_outside_parens(text: str) -> list[str]:
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for ch in text:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return [p.strip() for p in parts if p.strip()]


_COUNT = re.compile(r"^(\d+)([KMG]?)$", re.IGNORECASE)


def gpu_gres(gres: str, field: str) -> dict[str | None, int]:
    """GPUs by GRES type (None: untyped) in a node's GRES string; other GRES (shard, mps, nic) are skipped."""
    out: dict[str | None, int] = {}
    if not gres or gres.strip() in ("(null)", "N/A"):
        return out
    for entry in _split_outside_parens(gres):
        fields = re.sub(r"\(.*\)$", "", entry).split(":")
        if fields[0] != "gpu":
            continue
        kind: str | None = None
        count = 1
        if len(fields) >= 2:
            m = _COUNT.match(fields[-1])
            if m is not None and len(fields) in (2, 3):
                count = int(m.group(1)) * 1024 ** "_KMG".index(m.group(2).upper() or "_")
                kind = fields[1] if len(fields) == 3 else None
            elif len(fields) == 2:
                kind = fields[1]
            else:
                raise DomainError(field, f"cannot read GRES {entry!r} (expected gpu[:type][:count])")
        out[kind] = out.get(kind, 0) + count
    return {k: v for k, v in out.items() if v > 0}


def _strings(value: Any) -> tuple[str, ...]:
    """A CSV string or a list of strings, as a tuple (Slurm switched between both across versions)."""
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(v.strip() for v in value.split(",") if v.strip() and v.strip() != "(null)")
    if isinstance(value, list):
        return tuple(str(v).strip() for v in value if str(v).strip())
    return ()


def _text(value: Any) -> str:
    if isinstance(value, dict):  # sinfo groups: {"total": ..., "used": ...} / {"description": ...}
        value = value.get("total", value.get("description", ""))
    return value if isinstance(value, str) else ""


def _node_from_object(obj: Any, index: int) -> SlurmNode:
    """One element of a `nodes` list (v0.0.38 or v0.0.39+)."""
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str) or not obj["name"]:
        raise DomainError(f"nodes[{index}]", "a node must be an object with a non-empty `name`")
    state = obj.get("state")
    states = list(_strings(state)) if isinstance(state, list) else [state] if isinstance(state, str) else []
    states += list(_strings(obj.get("state_flags")))  # v0.0.38 kept the flags apart
    features = _strings(obj.get("active_features")) or _strings(obj.get("features"))
    return SlurmNode(
        obj["name"], tuple(s.upper() for s in states), _text(obj.get("gres")), features, _text(obj.get("reason"))
    )


def _nodes_from_sinfo(groups: list[Any]) -> list[SlurmNode]:
    """The nodes of sinfo's groups (v0.0.39+): a node listed by several partitions appears once."""
    out: dict[str, SlurmNode] = {}
    for i, group in enumerate(groups):
        if not isinstance(group, dict):
            raise DomainError(f"sinfo[{i}]", "must be an object")
        names = as_object(group.get("nodes")).get("nodes")
        if not isinstance(names, list):
            raise DomainError(f"sinfo[{i}].nodes.nodes", "must list the group's node names")
        states = tuple(s.upper() for s in _strings(as_object(group.get("node")).get("state")))
        features_obj = as_object(group.get("features"))
        features = _strings(features_obj.get("active")) or _strings(features_obj.get("total"))
        for name in names:
            node = SlurmNode(str(name), states, _text(group.get("gres")), features, _text(group.get("reason")))
            seen = out.get(node.name)
            if seen is not None and (seen.gres, set(seen.states)) != (node.gres, set(node.states)):
                raise DomainError(f"sinfo[{i}]", f"duplicate node name {node.name} with a different GRES or state")
            out[node.name] = node
    return list(out.values())


def read_slurm_nodes(text: str, source: str = "sinfo --json") -> tuple[list[SlurmNode], str]:
    """The nodes in Slurm's JSON and the shape read; malformed JSON or an unknown shape is one error line."""
    doc = document_mapping(
        text, "nodes", source, "(the output of `sinfo --json` or `scontrol show nodes --json`)", "JSON"
    )
    errors = as_list(doc.get("errors"))
    if errors:  # slurmctld not reachable, or refused: sinfo still exits 0 and prints an empty node list
        first = as_object(errors[0])
        what = first.get("description") or first.get("error") or errors[0]
        raise SchedulerReportedError("nodes", f"{source} printed an error instead of nodes: {str(what)[:200]}")
    plugin = as_object(as_object(doc.get("meta")).get("plugin"))
    version = plugin.get("data_parser") or plugin.get("type") or "unknown version"
    if isinstance(doc.get("sinfo"), list):
        nodes, shape = _nodes_from_sinfo(doc["sinfo"]), f"sinfo --json ({version})"
    elif isinstance(doc.get("nodes"), list):
        nodes = [_node_from_object(obj, i) for i, obj in enumerate(doc["nodes"])]
        seen: set[str] = set()
        for n in nodes:
            if n.name in seen:
                raise DomainError("nodes", f"duplicate node name {n.name} in {source}")
            seen.add(n.name)
        shape = f"node list ({version})"
    else:
        raise DomainError("nodes", f"{source} has no `nodes` or `sinfo` list (expected `sinfo --json` output)")
    return nodes, shape


def _gpu_of(
    node: SlurmNode, custom: dict[str, GPUSpec] | None, mapping: dict[str, GPUSpec]
) -> tuple[GpuChoice, str, int] | None:
    """The node's GPU type (how it was chosen, and the name it was read from) and count from its GRES (typed) or
    features (untyped GRES); None without GPUs."""
    field = f"nodes.{node.name}.gres"
    by_type = gpu_gres(node.gres, field)
    if not by_type:
        return None
    count = sum(by_type.values())
    read = f"GRES {node.gres!r}" + (f", features {','.join(node.features)!r}" if node.features else "")
    typed = sorted({t for t in by_type if t is not None})
    mapped = {mapping[k].name for k in map(canonical_gpu_name, typed) if k in mapping}
    if typed and len(mapped) == 1 and all(canonical_gpu_name(t) in mapping for t in typed):
        return GpuChoice(mapping[canonical_gpu_name(typed[0])], "mapped"), typed[0], count
    found = [resolve_scheduler_gpu([t], custom, field, read) for t in typed]
    gpu, name = None, ""
    if typed and all(found):
        if len({g.name for g in found if g}) > 1:
            raise DomainError(field, f"node {node.name}: {read} names several GPU types; a node holds one")
        gpu, name = found[0], typed[0]
    if gpu is None:  # untyped GRES (gpu:8) or a type the catalog does not know: the node's features may name it
        gpu = resolve_scheduler_gpu(list(node.features), custom, f"nodes.{node.name}.features", read)
        name = next((f for f in node.features if resolve_scheduler_gpu([f], custom, field, read) == gpu), "")
    if gpu is None:
        raise unknown_gpu(field, f"node {node.name}: {read}", custom)
    return choose(name, gpu, [*node.features, *typed], mapping, custom), name, count


def slurm_inventory(
    nodes_json: str,
    topology: SlurmTopology | None = None,
    custom: dict[str, GPUSpec] | None = None,
    source: str = "sinfo --json",
    gpu_map: dict[str, GPUSpec] | None = None,
) -> SchedulerInventory:
    """The GPU nodes of a Slurm cluster with their GPU type, state and place in the topology. `gpu_map` (canonical
    GRES type -> GPU, `--gpu a100=A100-SXM-40GB`) says what a family-only GRES type means; without it a node's
    features or GRES naming a memory size pick the variant, else the catalog's is assumed and said
    (`SchedulerInventory.assumed`, and a note)."""
    raw, shape = read_slurm_nodes(nodes_json, source)
    topo = topology or SlurmTopology()
    names = {n.name for n in raw}
    missing = sorted(topo.named_nodes() - names)
    if missing:
        more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        raise DomainError("topology", f"names nodes the inventory lacks: {', '.join(missing[:5])}{more}")
    out: list[ScheduledNode] = []
    ignored: dict[str, list[str]] = {}
    chosen: dict[tuple[str, GpuChoice], list[str]] = {}
    for node in raw:
        if FUTURE in node.states:
            ignored.setdefault("in state FUTURE (not yet in the cluster)", []).append(node.name)
            continue
        found = _gpu_of(node, custom, gpu_map or {})
        if found is None:
            ignored.setdefault("without GPUs", []).append(node.name)
            continue
        choice, gpu_name, count = found
        gpu = choice.gpu
        if choice.how in ("assumed", "memory"):
            chosen.setdefault((gpu_name, choice), []).append(node.name)
        state = node_state(node.states)
        why = "+".join(node.states) + (f" ({node.reason})" if node.reason else "") if state != "healthy" else ""
        block = topo.block_of.get(node.name)
        out.append(
            ScheduledNode(
                name=node.name,
                gpu=gpu.name,
                gpus=count,
                state=state,
                why=why[:200],
                switches=topo.switches_of.get(node.name, []),
                domain=block,
                domain_source="Slurm topology block" if block else "",
            )
        )
    notes = list(topo.notes)
    if topo.plugin == "none":
        notes.append("no Slurm topology given: nodes carry no switches")
    assumed = {name: choice.gpu.name for (name, choice), on in chosen.items() if choice.how == "assumed"}
    notes += [assumption_note(name, choice, len(on), custom) for (name, choice), on in chosen.items()]
    return SchedulerInventory(source=f"Slurm {shape}", nodes=out, ignored=ignored, notes=notes, assumed=assumed)
