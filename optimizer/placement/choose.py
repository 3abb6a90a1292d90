"""Choosing the hosts of a plan and the GPU of every rank: a structured greedy over the inventory's fabric.

Stage s holds ranks s*n .. s*n + n - 1 (Megatron's rank order puts pp outermost), and inside a stage the groups the
cost model prices as one NVLink domain are runs of consecutive ranks: TP (and expert-TP) groups of tp (etp) ranks,
and, on NVLink domains larger than a node, the runs of DP / CP / EP ranks network.group_levels places in one domain
(the stage's `chunk`). So a stage of whole nodes is laid out from whole pieces of one NVLink domain:

1. every (leaf switch, NVLink domain) set of healthy nodes is cut into chunks, then the rest into TP blocks, then
   single nodes (a TP group built from single nodes of different domains is split: the price says so);
2. each stage takes its nodes from one leaf switch where one has room: the previous stage's leaf first (pipeline
   neighbours share it), else the leaf with the most room (the leaves with the most healthy nodes first), trying
   chunks only, then chunks and blocks, then any node; only when no leaf has room does a stage straddle leaves.

Stages smaller than a node (or not a whole number of nodes) fill GPU slots in the same order (leaf by leaf, domain
by domain), a pool's consecutive stages sharing nodes."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from optimizer.errors import DomainError
from optimizer.placement.hosts import Host, healthy_hosts
from optimizer.spec.cluster_spec import ClusterSpec, NodePool
from optimizer.spec.parallel_config import ParallelConfig

CHUNKS, BLOCKS, SINGLES = 0, 1, 2
HostRun = tuple[Host, int, int]  # consecutive ranks on one host: (host, first local GPU, GPUs)


def domain_chunk(c: ParallelConfig, domain_gpus: int) -> int:
    """The run of consecutive ranks of a stage that the cost model prices inside one NVLink domain of
    `domain_gpus` GPUs: for each group of `size` ranks `stride` apart, network.group_levels keeps gcd(size,
    domain / stride) members in a domain, a run of stride x that many ranks; the least common multiple of those
    runs (at most the domain)."""
    groups = [
        (c.tp, 1),
        (c.cp, c.tp),
        (c.dp * c.cp, c.tp),
        (c.expert_tp, 1),
        (c.ep, c.expert_tp),
        (c.expert_dp, c.expert_tp * c.ep),
    ]
    runs = [
        stride * math.gcd(size, domain_gpus // stride) for size, stride in groups if size > 1 and stride <= domain_gpus
    ]
    run = 1
    for r in runs:
        run = math.lcm(run, r)
    return run if run <= domain_gpus else max(runs, default=1)


@dataclass
class Leaf:
    """The unused healthy nodes under one leaf switch, as pieces: chunks, TP blocks, single nodes."""

    name: str
    healthy: int
    pieces: list[list[list[Host]]] = field(default_factory=lambda: [[], [], []])
    _nodes: list[int] | None = None  # nodes per kind of piece (None: to count again)

    def room(self, level: int) -> int:
        """Nodes in pieces of kinds up to `level` (CHUNKS, BLOCKS, SINGLES)."""
        if self._nodes is None:  # counted once per change: 100,000-node leaves are asked for every stage
            self._nodes = [sum(map(len, self.pieces[k])) for k in range(3)]
        return sum(self._nodes[: level + 1])

    def take(self, n: int, level: int, split: bool = False) -> list[Host]:
        """Up to `n` nodes from whole pieces of kinds up to `level`, chunks first; with `split`, the last piece
        may be cut (its rest stays as single nodes). Pieces that do not fit stay; the scan stops once it has `n`
        (every later piece would stay)."""
        got: list[Host] = []
        self._nodes = None
        for k in range(level + 1):
            pieces = self.pieces[k]
            keep: list[list[Host]] = []
            i = 0
            while i < len(pieces) and len(got) < n:
                piece = pieces[i]
                i += 1
                if len(got) + len(piece) <= n:
                    got += piece
                elif split:
                    need = n - len(got)
                    got += piece[:need]
                    self.pieces[SINGLES] += [[h] for h in piece[need:]]
                else:
                    keep.append(piece)
            self.pieces[k] = keep + pieces[i:]
        return got


def _by_leaf_and_domain(hosts: list[Host]) -> dict[str, dict[str, list[Host]]]:
    out: dict[str, dict[str, list[Host]]] = {}
    for h in hosts:
        out.setdefault(h.leaf, {}).setdefault(h.domain, []).append(h)
    return out


class PoolStock:
    """The healthy nodes of one pool not yet given to a stage."""

    def __init__(self, cluster: ClusterSpec, pool: NodePool, c: ParallelConfig) -> None:
        self.pool = pool
        self.g = pool.gpus_per_node
        self.n_gpus = c.gpus_per_stage
        fabric = cluster.fabric_of(pool)
        domain_gpus = (fabric.domain_size or 1) if fabric.kind == "nvlink" else 1
        block = math.lcm(c.tp, c.expert_tp)
        chunk = math.lcm(domain_chunk(c, max(domain_gpus, self.g)), block)
        self.whole = self.n_gpus % self.g == 0
        nb = block // self.g if block % self.g == 0 else 1
        nc = chunk // self.g if chunk % self.g == 0 else 1
        nc = math.lcm(nc, nb)
        if self.whole and (self.n_gpus // self.g) % nc:
            nc = nb if (self.n_gpus // self.g) % nb == 0 else 1
        if self.whole and (self.n_gpus // self.g) % nb:
            nb = nc = 1
        groups = _by_leaf_and_domain(healthy_hosts(cluster, pool))
        self.leaves: list[Leaf] = []
        order: list[Host] = []
        for name, domains in sorted(groups.items(), key=lambda kv: (-sum(map(len, kv[1].values())), kv[0])):
            leaf = Leaf(name, sum(map(len, domains.values())))
            for hosts in sorted(domains.values(), key=lambda hs: (-len(hs), hs[0].index)):
                order += hosts
                cut = len(hosts) - len(hosts) % nc
                leaf.pieces[CHUNKS] += [hosts[i : i + nc] for i in range(0, cut, nc)]
                rest = hosts[cut:]
                cut_b = len(rest) - len(rest) % nb
                leaf.pieces[BLOCKS] += [rest[i : i + nb] for i in range(0, cut_b, nb)]
                leaf.pieces[SINGLES] += [[h] for h in rest[cut_b:]]
            self.leaves.append(leaf)
        self.order = order  # slot order for stages that are not whole nodes
        self.cursor = 0  # next free GPU slot in `order` (host index x g + local)
        self.last_leaf: str | None = None

    def _leaf(self, name: str | None) -> Leaf | None:
        return next((lf for lf in self.leaves if lf.name == name), None)

    def _whole_nodes(self, follows: bool) -> list[Host]:
        n = self.n_gpus // self.g
        current = self._leaf(self.last_leaf) if follows else None
        for level in (CHUNKS, BLOCKS, SINGLES):
            if current is not None and current.room(level) >= n:
                return current.take(n, level)
            fits = [lf for lf in self.leaves if lf.room(level) >= n]
            if fits:
                best = max(fits, key=lambda lf: (lf.room(level), lf.healthy))
                return best.take(n, level)
        got: list[Host] = []
        others = sorted(self.leaves, key=lambda lf: (lf is not current, -lf.room(SINGLES), -lf.healthy))
        for lf in others:
            got += lf.take(n - len(got), SINGLES, split=True)
            if len(got) == n:
                return got
        raise DomainError(
            "config", f"pool {self.pool.name} has too few healthy nodes for {self.n_gpus}-GPU stages ({n} nodes each)"
        )

    def take_stage(self, follows: bool) -> list[HostRun]:
        """The next stage's ranks on this pool, as runs of consecutive ranks on one host (host, first local GPU,
        GPUs); `follows`: the previous stage runs on this pool too (its leaf is preferred, and stages smaller than
        a node share its last node)."""
        if self.whole:
            hosts = self._whole_nodes(follows)
            self.last_leaf = hosts[-1].leaf if hosts else None
            return [(h, 0, self.g) for h in hosts]
        if not follows and self.cursor % self.g:  # a node's ranks stay consecutive: start on a fresh node
            self.cursor += self.g - self.cursor % self.g
        end = self.cursor + self.n_gpus
        if end > len(self.order) * self.g:
            raise DomainError("config", f"pool {self.pool.name} has too few healthy GPUs for its stages")
        runs: list[HostRun] = []
        for k in range(self.cursor // self.g, (end - 1) // self.g + 1):
            lo, hi = max(self.cursor, k * self.g), min(end, (k + 1) * self.g)
            runs.append((self.order[k], lo - k * self.g, hi - lo))
        self.cursor = end
        self.last_leaf = runs[-1][0].leaf
        return runs


def rank_slots(cluster: ClusterSpec, c: ParallelConfig, pools: Sequence[NodePool]) -> list[HostRun]:
    """The global ranks in order, as runs on one host each (host, first local GPU, GPUs): stage by stage, each from
    its pool's stock. Runs, not one entry per rank: 800,000 ranks are 100,000 runs (issue 49)."""
    stocks: dict[str, PoolStock] = {}
    out: list[HostRun] = []
    previous: str | None = None
    for pool in pools:
        stock = stocks.get(pool.name)
        if stock is None:
            stock = stocks[pool.name] = PoolStock(cluster, pool, c)
        out += stock.take_stage(follows=previous == pool.name)
        previous = pool.name
    return out
