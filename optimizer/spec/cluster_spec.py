"""Cluster inventory: node pools, their fabric inside and between nodes, and the state of every node."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from functools import cached_property
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from optimizer.errors import DomainError, UnknownNameError
from optimizer.spec.calibration import IDENTITY, ClusterCalibration, PoolCalibration
from optimizer.spec.gpu_catalog import GPUSpec, resolve_gpu
from optimizer.spec.names import FrameworkName
from optimizer.spec.reliability import DEFAULT_RELIABILITY, PoolReliability

NodeState = Literal["healthy", "drained", "failed"]

# PCIe x16 payload bandwidth per direction, GB/s: gen3 ~16, gen4 ~32, gen5 ~64 [ST; PCI-SIG].
PCIE_GBYTES_PER_S: dict[int, float] = {3: 16.0, 4: 32.0, 5: 64.0, 6: 128.0, 7: 256.0}


class IntraNodeFabric(BaseModel):
    """How GPUs inside one node talk: an NVLink/NVSwitch domain, or PCIe only."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["nvlink", "pcie"] = Field(description="nvlink (NVLink/NVSwitch/Infinity Fabric) or pcie.")
    gbytes_per_s: float | None = Field(
        default=None, gt=0, le=100_000, description="Scale-up bandwidth per GPU, GB/s per direction."
    )
    domain_size: int | None = Field(
        default=None,
        ge=1,
        le=100_000,
        description="GPUs in one NVLink domain (may exceed a node, e.g. NVL72).",
    )
    pcie_gen: int | None = Field(default=None, ge=3, le=7, description="PCIe generation of the GPUs' host link.")


class InterNodeFabric(BaseModel):
    """The NICs that connect a node to the others."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    nics_per_node: int = Field(default=1, ge=0, le=64, description="Data NICs per node (storage NICs excluded).")
    gbits_per_s: float = Field(default=100.0, gt=0, le=100_000, description="Line rate of one NIC, Gb/s.")

    @property
    def gbytes_per_s_per_node(self) -> float:
        """Aggregate NIC line rate of one node, GB/s per direction."""
        return self.nics_per_node * self.gbits_per_s / 8.0


class Node(BaseModel):
    """One node of a pool."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(
        min_length=1, max_length=128, pattern=r"^[A-Za-z0-9._:-]+$", description="Host name, unique in the cluster."
    )
    state: NodeState = Field(default="healthy", description="Only healthy nodes are planned on.")
    switches: list[str] = Field(
        default_factory=list,
        max_length=8,
        description="The network switches above the node, leaf first (Slurm topology.conf tree, Topograph "
        "fabric tiers, Kueue topology levels); empty: unknown (the pool's pod_size stands in).",
    )
    nvlink_domain: str | None = Field(
        default=None,
        max_length=128,
        description="The NVLink domain the node's GPUs share with other nodes (GB200 / GB300 NVL72 clique "
        "nvidia.com/gpu.clique, Slurm topology block); None: the node's own.",
    )


# The largest fleets announced hold about 100,000-200,000 GPUs (12,500-25,000 nodes of 8): a pool of more nodes is
# an input mistake, not a cluster [issue 16: a 10^6-node cluster was accepted and slowed every listing].
MAX_NODES_PER_POOL = 100_000
# The same bound over a whole cluster: xAI's Colossus, the largest announced, holds about 200,000 GPUs (25,000
# 8-GPU nodes) [xAI, Colossus page, 2025]; Meta trained Llama 3 on 16,384 H100s (2,048 nodes) [Llama 3 paper,
# arXiv:2407.21783 §3.3.1]. 100,000 nodes is 4x the largest, and bounds what parsing an inventory costs [issue 37 §3:
# 10 pools of 100,000 nodes made the cluster page take 9 s].
MAX_NODES_PER_CLUSTER = 100_000


class NodePool(BaseModel):
    """Identical nodes: same GPU type, count and fabric."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._-]+$", description="Pool name.")
    gpu: str = Field(min_length=1, max_length=64, description="GPU type (catalog or cluster-defined name).")
    nodes: int | list[Node] = Field(description="Node count, or the nodes with their names and states.")
    gpus_per_node: int = Field(ge=1, le=1024, description="GPUs in each node.")
    intra_node: IntraNodeFabric | None = Field(default=None, description="Default: the GPU type's own fabric.")
    inter_node: InterNodeFabric = Field(default_factory=InterNodeFabric, description="NICs between nodes.")
    pod_size: int | None = Field(
        default=None, ge=1, description="Nodes per pod/rack under one non-blocking switch tier; None = all."
    )
    oversubscription: float = Field(
        default=1.0,
        ge=1.0,
        le=64.0,
        description="Bandwidth oversubscription of links between pods (e.g. 2.0).",
    )
    node_states: dict[str, NodeState] = Field(
        default_factory=dict, description="State overrides by node name (for `nodes` given as a count)."
    )
    price_per_gpu_hour: float | None = Field(default=None, ge=0, description="Price of one GPU-hour, any currency.")
    reliability: PoolReliability | None = Field(
        default=None,
        description="Failure rates, checkpoint bandwidth, restart cost and spare nodes (optimizer/spec/"
        "reliability.py); None: the sourced defaults.",
    )

    @model_validator(mode="after")
    def _check(self) -> NodePool:
        count = self.nodes if isinstance(self.nodes, int) else len(self.nodes)
        if count < 1 or count > MAX_NODES_PER_POOL:
            raise DomainError(f"pools.{self.name}.nodes", f"must be between 1 and {MAX_NODES_PER_POOL} (got {count})")
        if self.reliability is not None and self.reliability.spare_nodes >= count:
            raise DomainError(
                f"pools.{self.name}.reliability.spare_nodes",
                f"must be fewer than the pool's {count} nodes (got {self.reliability.spare_nodes})",
            )
        if isinstance(self.nodes, list):
            names = [n.name for n in self.nodes]
            if len(set(names)) != len(names):
                raise DomainError(f"pools.{self.name}.nodes", "node names must be unique")
            unknown = set(self.node_states) - set(names)
        else:  # generated names: checked by their form, without building the node list
            unknown = {n for n in self.node_states if self._generated_index(n) is None}
        if unknown:
            raise DomainError(
                f"pools.{self.name}.node_states",
                f"unknown node(s) {sorted(unknown)[:5]}; nodes are named {self.node_name(0)}...",
            )
        return self

    def _width(self) -> int:
        return max(3, len(str(int(self.nodes) - 1))) if isinstance(self.nodes, int) else 0

    def node_name(self, index: int) -> str:
        """The name of node `index` (generated `<pool>-000`... for a count)."""
        if isinstance(self.nodes, list):
            return self.nodes[index].name
        return f"{self.name}-{index:0{self._width()}d}"

    def _generated_index(self, node: str) -> int | None:
        prefix, _, digits = node.rpartition("-")
        if prefix != self.name or len(digits) != self._width() or not (digits.isascii() and digits.isdigit()):
            return None
        index = int(digits)
        return index if index < int(self.nodes) else None  # type: ignore[arg-type]

    @cached_property
    def node_list(self) -> list[Node]:
        """Every node with its state (generated names `<pool>-000`... for a count)."""
        if isinstance(self.nodes, list):
            return [n.model_copy(update={"state": self.node_states.get(n.name, n.state)}) for n in self.nodes]
        names = [self.node_name(i) for i in range(self.nodes)]
        return [Node(name=n, state=self.node_states.get(n, "healthy")) for n in names]

    @property
    def node_count(self) -> int:
        """Nodes in the pool, whatever their state."""
        return self.nodes if isinstance(self.nodes, int) else len(self.nodes)

    def node_at(self, index: int) -> Node:
        """Node `index` with its state, without building the node list."""
        if isinstance(self.nodes, list):
            node = self.nodes[index]
            return node.model_copy(update={"state": self.node_states.get(node.name, node.state)})
        name = self.node_name(index)
        return Node(name=name, state=self.node_states.get(name, "healthy"))

    def has_node(self, node: str) -> bool:
        """Whether `node` names a node of this pool."""
        if isinstance(self.nodes, list):
            return any(n.name == node for n in self.nodes)
        return self._generated_index(node) is not None

    def state_counts(self) -> dict[str, int]:
        """Nodes by state (for a count, from the overrides alone)."""
        if isinstance(self.nodes, list):
            return dict(Counter(n.state for n in self.node_list))
        counts: dict[str, int] = dict(Counter(str(state) for state in self.node_states.values() if state != "healthy"))
        counts["healthy"] = self.nodes - sum(counts.values())
        return {k: v for k, v in counts.items() if v}

    @cached_property
    def healthy_nodes(self) -> int:
        """Nodes in state healthy, without building the node list (for a count, from the overrides alone; for a
        listing, each node's state as node_list gives it: 100,000 listed nodes counted in milliseconds where
        copying them took 4.5 s [issue 49, a submission's check])."""
        if isinstance(self.nodes, int):
            return self.nodes - sum(1 for state in self.node_states.values() if state != "healthy")
        states = self.node_states
        return sum(1 for n in self.nodes if states.get(n.name, n.state) == "healthy")

    @property
    def healthy_gpus(self) -> int:
        """GPUs on healthy nodes."""
        return self.healthy_nodes * self.gpus_per_node

    @property
    def plannable_gpus(self) -> int:
        """GPUs a training plan may use: those of healthy nodes not held back as spares (reliability.spare_nodes)."""
        held = self.reliability.spare_nodes if self.reliability is not None else 0
        return max(0, self.healthy_nodes - held) * self.gpus_per_node

    @property
    def reliability_or_default(self) -> PoolReliability:
        """The pool's reliability inputs (the sourced defaults where unset)."""
        return self.reliability or DEFAULT_RELIABILITY


class ClusterSpec(BaseModel):
    """A cluster inventory."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(default="cluster", min_length=1, max_length=128, description="Cluster name.")
    pools: list[NodePool] = Field(min_length=1, max_length=256, description="Node pools.")
    gpu_types: list[GPUSpec] = Field(default_factory=list, description="User-defined GPU types used by pools.")
    # The cluster's own calibration, applied at planning time; not part of the inventory (never stored or hashed
    # with it) [issue 14].
    _calibration: ClusterCalibration | None = PrivateAttr(default=None)
    _tier_cache: dict[int, tuple[object, ...]] = PrivateAttr(default_factory=dict)

    @model_validator(mode="after")
    def _check(self) -> ClusterSpec:
        names = [p.name for p in self.pools]
        if len(set(names)) != len(names):
            raise DomainError("cluster.pools", "pool names must be unique")
        total = self.node_count
        if total > MAX_NODES_PER_CLUSTER:
            raise DomainError(
                "cluster.pools",
                f"the pools hold {total} nodes in all; a cluster holds at most {MAX_NODES_PER_CLUSTER} "
                "(4x the largest announced: split it into clusters)",
            )
        custom = {g.name: g for g in self.gpu_types}
        for pool in self.pools:
            resolve_gpu(pool.gpu, custom, field=f"pools.{pool.name}.gpu")
        # Generated names (<pool>-<digits>) cannot collide with each other (pool names are unique); only listed
        # names can, with each other or with a generated one. Checked without building large node lists.
        listed = [n.name for p in self.pools if isinstance(p.nodes, list) for n in p.nodes]
        counted = [p for p in self.pools if isinstance(p.nodes, int)]
        if len(set(listed)) != len(listed) or any(p.has_node(n) for n in listed for p in counted):
            raise DomainError("cluster.pools", "node names must be unique across pools")
        return self

    def pool(self, name: str) -> NodePool:
        """The pool called `name`."""
        for p in self.pools:
            if p.name == name:
                return p
        raise UnknownNameError("pool", name, [p.name for p in self.pools])

    @property
    def node_count(self) -> int:
        """Nodes in all pools, whatever their state."""
        return sum(p.node_count for p in self.pools)

    def indexed_nodes_page(self, offset: int, limit: int) -> list[tuple[NodePool, int, Node]]:
        """Nodes `offset` to `offset + limit` of the cluster, pool by pool, as (pool, index in the pool, node):
        work proportional to the pools and `limit`, not to the node count."""
        page: list[tuple[NodePool, int, Node]] = []
        for pool in self.pools:
            count = pool.node_count
            if offset >= count:
                offset -= count
                continue
            end = min(count, offset + limit - len(page))
            page.extend((pool, i, pool.node_at(i)) for i in range(offset, end))
            offset = 0
            if len(page) >= limit:
                break
        return page

    def nodes_page(self, offset: int, limit: int) -> list[tuple[str, Node]]:
        """Nodes `offset` to `offset + limit` of the cluster, pool by pool, as (pool name, node)."""
        return [(pool.name, node) for pool, _, node in self.indexed_nodes_page(offset, limit)]

    def unhealthy_nodes(self, limit: int) -> list[tuple[str, Node]]:
        """The first `limit` nodes not healthy, as (pool, node), in pool order: a counted pool's from its overrides
        alone, a listed pool's by scanning its (already parsed) nodes until `limit` are found."""
        found: list[tuple[str, Node]] = []
        for pool in self.pools:
            if isinstance(pool.nodes, int):
                names = (n for n, state in pool.node_states.items() if state != "healthy")
                candidates = (Node(name=n, state=pool.node_states[n]) for n in names)
            else:
                states = pool.node_states
                candidates = (
                    n.model_copy(update={"state": states.get(n.name, n.state)})
                    for n in pool.nodes
                    if states.get(n.name, n.state) != "healthy"
                )
            for node in candidates:
                if node.state != "healthy":
                    found.append((pool.name, node))
                    if len(found) >= limit:
                        return found
        return found

    def price_per_s(self, gpus_per_stage: int, stage_pools: Sequence[str]) -> float | None:
        """Price per second of a plan's GPUs: each stage's GPUs at its pool's price_per_gpu_hour / 3600; None
        when a pool it uses has no price."""
        prices = [self.pool(n).price_per_gpu_hour for n in stage_pools]
        if any(p is None for p in prices):
            return None
        return gpus_per_stage * sum(p or 0.0 for p in prices) / 3600

    def gpu_of(self, pool: NodePool) -> GPUSpec:
        """The GPU spec of a pool (as catalogued: MFU and capacities use it)."""
        return resolve_gpu(pool.gpu, {g.name: g for g in self.gpu_types})

    def with_calibration(self, calibration: ClusterCalibration | None) -> ClusterSpec:
        """This inventory priced with `calibration` (None: the sourced constants)."""
        copy = self.model_copy()
        copy._calibration = calibration
        return copy

    @property
    def tier_cache(self) -> dict[int, tuple[object, ...]]:
        """Memo of network.cluster_tiers, keyed by pool identity (entries carry the pool and calibration they were
        computed for, so a copy sharing the dict never reads a stale entry)."""
        return self._tier_cache

    @property
    def calibration(self) -> ClusterCalibration | None:
        """The calibration applied to this inventory, if any."""
        return self._calibration

    def calibration_of(self, pool: NodePool) -> PoolCalibration:
        """The fitted constants of a pool (the identity when uncalibrated)."""
        return self._calibration.of(pool.name) if self._calibration is not None else IDENTITY

    def compute_gpu(self, pool: NodePool, framework: FrameworkName | None = None) -> GPUSpec:
        """The GPU spec the cost model computes with: peak FLOP/s scaled by the pool's calibrated compute factor
        (times `framework`'s own where the calibration has one; FP8 peaks also by the FP8 factor) and device-memory
        bandwidth by its memory-bound factor (the catalogued spec when uncalibrated)."""
        gpu = self.gpu_of(pool)
        cal = self.calibration_of(pool)
        own = cal.framework_compute.get(framework, 1.0) if framework is not None else 1.0
        k, mem = cal.compute * own, cal.memory_bound
        if k == 1.0 and mem == 1.0 and cal.fp8_compute == 1.0:
            return gpu
        fp8 = gpu.fp8_tflops * k * cal.fp8_compute if gpu.fp8_tflops is not None else None
        return gpu.model_copy(
            update={"bf16_tflops": gpu.bf16_tflops * k, "fp8_tflops": fp8, "memory_tbps": gpu.memory_tbps * mem}
        )

    def fabric_of(self, pool: NodePool) -> IntraNodeFabric:
        """The pool's intra-node fabric with every default filled from its GPU type."""
        gpu = self.gpu_of(pool)
        f = pool.intra_node
        has_nvlink = gpu.scaleup_gbytes_per_s > 0 and gpu.scaleup_domain > 1
        kind = f.kind if f else ("nvlink" if has_nvlink else "pcie")
        if kind == "nvlink":
            bw = (f.gbytes_per_s if f and f.gbytes_per_s else None) or gpu.scaleup_gbytes_per_s or None
            if bw is None:
                raise DomainError(f"pools.{pool.name}.intra_node.gbytes_per_s", f"required: {gpu.name} has no NVLink")
            domain = (f.domain_size if f and f.domain_size else None) or min(gpu.scaleup_domain, pool.gpus_per_node)
            if gpu.scaleup_domain > pool.gpus_per_node and not (f and f.domain_size):
                domain = gpu.scaleup_domain
        else:
            bw, domain = None, 1
        gen = (f.pcie_gen if f and f.pcie_gen else None) or gpu.pcie_gen
        return IntraNodeFabric(kind=kind, gbytes_per_s=bw, domain_size=domain, pcie_gen=gen)

    @property
    def healthy_gpus(self) -> int:
        """GPUs on healthy nodes in all pools."""
        return sum(p.healthy_gpus for p in self.pools)
