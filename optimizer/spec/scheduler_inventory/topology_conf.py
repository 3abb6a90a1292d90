"""Slurm's network topology: topology.conf (tree and block plugins) or what `scontrol show topology` prints.

Both are lines of `Key=Value` pairs [topology.conf(5), SchedMD/slurm doc/man/man5/topology.conf.5]:
  tree:  `SwitchName=s0 Nodes=dev[0-5]`, `SwitchName=s3 Switches=s[0-2]` (LinkSpeed is "currently not used");
         scontrol adds `Level=` and lists on an upper switch all the nodes below it (`Nodes=`) beside `Switches=`;
  block: `BlockName=block1 Nodes=node[1-32]` and `BlockSizes=30,120` (Slurm 23.11 and later; NVL72 racks);
  ring:  `RingName=r0 Nodes=...` (26.x), which places no switch above a node and is read as no topology.
Keys are case-insensitive, `#` starts a comment, a trailing backslash continues a line.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from optimizer.errors import DomainError
from optimizer.spec.scheduler_inventory.hostlist import expand_hostlist

# Node.switches holds at most 8 levels; Slurm's own tree plugin has no limit, real fabrics have 2-4 [Slurm
# topology guide: "three-level fat tree"].
MAX_LEVELS = 8


@dataclass
class SlurmTopology:
    """The switches above each node (leaf first) and the block each node is in."""

    switches_of: dict[str, list[str]] = field(default_factory=dict)
    block_of: dict[str, str] = field(default_factory=dict)
    plugin: str = "none"
    notes: list[str] = field(default_factory=list)

    def named_nodes(self) -> set[str]:
        return set(self.switches_of) | set(self.block_of)


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(line number, text) with comments removed and continuation lines joined."""
    out: list[tuple[int, str]] = []
    pending, start = "", 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].rstrip()
        if not pending:
            start = number
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = pending + line
        pending = ""
        if line.strip():
            out.append((start, line.strip()))
    if pending.strip():
        out.append((start, pending.strip()))
    return out


def _pairs(line: str, number: int) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for token in line.split():
        key, sep, value = token.partition("=")
        if not sep or not key:
            raise DomainError("topology", f"line {number}: expected Key=Value, got {token[:60]!r}")
        pairs[key.lower()] = value
    return pairs


@dataclass
class _Switch:
    line: int
    nodes: list[str]
    children: list[str]


def parse_topology(text: str, source: str = "topology.conf") -> SlurmTopology:
    """The tree or blocks of a topology.conf (or `scontrol show topology` output); errors name the line."""
    switches: dict[str, _Switch] = {}
    blocks: dict[str, tuple[int, list[str]]] = {}
    topo = SlurmTopology()
    for number, line in _logical_lines(text):
        pairs = _pairs(line, number)
        if "switchname" in pairs:
            name = pairs["switchname"]
            if not name or name in switches:
                raise DomainError(
                    "topology", f"line {number}: switch {name!r} is {'empty' if not name else 'named twice'}"
                )
            kids = expand_hostlist(pairs.get("switches", ""), f"topology line {number}")
            # An upper switch lists every node below it in scontrol's output: its children are its switches.
            nodes = [] if kids else expand_hostlist(pairs.get("nodes", ""), f"topology line {number}")
            switches[name] = _Switch(number, nodes, kids)
        elif "blockname" in pairs:
            name = pairs["blockname"]
            if not name or name in blocks:
                raise DomainError(
                    "topology", f"line {number}: block {name!r} is {'empty' if not name else 'named twice'}"
                )
            blocks[name] = (number, expand_hostlist(pairs.get("nodes", ""), f"topology line {number}"))
        elif "blocksizes" in pairs or "ringname" in pairs or "topology" in pairs:
            continue  # block sizes steer Slurm's placement, not the fabric; rings place no switch above a node
        else:
            first = line.split("=", 1)[0]
            raise DomainError(
                "topology", f"line {number}: expected SwitchName= or BlockName= ({source}), got {first[:40]!r}"
            )
    if switches and blocks:
        raise DomainError("topology", f"{source} mixes SwitchName (tree) and BlockName (block) lines")
    if switches:
        topo.plugin = "tree"
        topo.switches_of = _paths(switches)
    elif blocks:
        topo.plugin = "block"
        for name, (number, nodes) in blocks.items():
            for node in nodes:
                if node in topo.block_of:
                    raise DomainError(
                        "topology", f"line {number}: node {node} is in blocks {topo.block_of[node]} and {name}"
                    )
                topo.block_of[node] = name
    return topo


def _paths(switches: dict[str, _Switch]) -> dict[str, list[str]]:
    """Each node's switches, leaf first, up the tree."""
    parent: dict[str, str] = {}
    for name, sw in switches.items():
        for kid in sw.children:
            if kid not in switches:
                raise DomainError("topology", f"line {sw.line}: switch {name} names unknown switch {kid!r}")
            if kid in parent:
                raise DomainError("topology", f"line {sw.line}: switch {kid} is below both {parent[kid]} and {name}")
            parent[kid] = name
    leaf_of: dict[str, str] = {}
    for name, sw in switches.items():
        for node in sw.nodes:
            if node in leaf_of:
                raise DomainError("topology", f"line {sw.line}: node {node} is below both {leaf_of[node]} and {name}")
            leaf_of[node] = name
    paths: dict[str, list[str]] = {}
    chains: dict[str, list[str]] = {}
    for node, leaf in leaf_of.items():
        if leaf not in chains:
            chain = [leaf]
            while chain[-1] in parent:
                up = parent[chain[-1]]
                if up in chain:
                    raise DomainError("topology", f"line {switches[up].line}: switches {' > '.join(chain)} form a loop")
                chain.append(up)
            if len(chain) > MAX_LEVELS:
                raise DomainError(
                    "topology",
                    f"line {switches[leaf].line}: {len(chain)} switch levels above {node}; at most {MAX_LEVELS}",
                )
            chains[leaf] = chain
        paths[node] = chains[leaf]
    return paths
