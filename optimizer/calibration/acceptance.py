"""Acceptance tests in [issue 33 §1]: what a cluster team measured on a pool before any training run (nccl-tests,
the MAMF GEMM sweep) set next to the figure the cost model sources for it, and turned into priors of the pool's
calibration constants (`Priors`, optimizer/spec/calibration.py), which `fit_calibration` starts from.

Which sourced value each measurement corresponds to:

- nccl-tests' bus bandwidth is "comparable to the hardware peak bandwidth, independently of the number of ranks"
  [NT doc/PERFORMANCE.md]: a ring's busbw is the rate of its slowest link. On the cost model's tiers
  (costmodel/network.pool_tiers: NVLink or PCIe bus bandwidth per GPU x its efficiency; NIC rate per node / GPUs
  per node x its efficiency), each level a run spans bounds it:
  * all_reduce, all_gather, reduce_scatter run rings; across nodes NCCL runs one ring channel per NIC, so the NICs
    bound the busbw at the node's NIC rate (the per-GPU share x the ranks per node): "the busbw is going to reflect
    exactly what's going through the NICs" [NT #160, sjeaugey];
  * alltoall: every rank sends what leaves each level through its own share of that level, the cost model's
    all_to_all (the slowest level bounds it; busbw = algbw (n-1)/n [NT src/alltoall.cu]);
  * sendrecv: each rank sends to the next; the slowest pair's link (one GPU's share) bounds it.
  A single-node run (or any run inside one NVLink domain) pins `intra_node`, whose factor scales the NVLink and
  PCIe bandwidths; a multi-node run pins `network` (NIC bandwidth), given the pool's intra-node factor. The factor
  is measured / sourced on the tier that binds; a run bound by another tier pins nothing.
  The cost model's own pricing of the same collective (costmodel/network.py's functions on the same levels, which
  add a hierarchical all-reduce's intra-node and network phases rather than pipelining them as NCCL's ring does)
  is shown beside it as `modelled`.
- mamf-finder's best mean TFLOP/s is the GPU's maximum achievable matmul rate; the cost model sources it as the
  dense peak x `mamf_fraction` [ST] (x FP8_MAMF_RATIO for FP8), before its framework factor
  (costmodel/compute.gemm_efficiency). Their ratio pins `compute`, which scales the peak (ClusterSpec.compute_gpu).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field

from optimizer.calibration.gemm_bench import FIELD as GEMM_FIELD
from optimizer.calibration.gemm_bench import GemmBenchRun
from optimizer.calibration.nccl_tests import FIELD as NCCL_FIELD
from optimizer.calibration.nccl_tests import PLATEAU_ROWS, NcclRow, NcclTestRun
from optimizer.costmodel.compute import peak_flops
from optimizer.costmodel.constants import FP8_MAMF_RATIO, NIC_EFFICIENCY, NVLINK_EFFICIENCY, PCIE_EFFICIENCY
from optimizer.costmodel.network import INF, Level, Tier, all_gather, all_reduce, all_to_all, p2p, pool_tiers
from optimizer.errors import DomainError, UnknownNameError
from optimizer.spec.calibration import BOUNDS, PoolCalibration, Prior, Priors
from optimizer.spec.cluster_spec import ClusterSpec, NodePool
from optimizer.spec.gpu_catalog import BUILTIN_GPUS, GPUSpec, resolve_gpu

Kind = Literal["nccl-tests", "gemm"]
KINDS: tuple[Kind, ...] = ("nccl-tests", "gemm")
TestRun = NcclTestRun | GemmBenchRun

# The plateau must be reached: NCCL's bus bandwidth levels off from about 64 MiB on H100 NVLink and 400G
# InfiniBand [nccl_tests.PLATEAU_ROWS]; the plateau is read on the three largest messages, so the largest must be at
# least 128 MiB: the size nccl-tests' own README examples run to (`all_reduce_perf -b 8 -e 128M -f 2 -g 8`).
MIN_LARGEST_BYTES = 128 * 2**20
# Prior spread of a constant an acceptance test pinned, log units. nccl-tests' busbw varies from run to run by a few
# percent on healthy nodes (Azure/azurehpc #690 repeats its NCCL all-reduce health check because "on healthy nodes we
# observed some variability over time"; at 248 nodes NT #283 reports about 350 GB/s, now and then below 300), so 3%
# with the run's own scatter over its plateau (out-of-place and in-place of its largest messages) added.
RUN_TO_RUN_SPREAD = 0.03
# A GEMM sweep measures one GPU of the pool at one moment: GPUs of one type differ by their clocks and power limits
# by a few percent ([ST]'s MAMF table: H100 SXM 794.5, the 900 W GH200 828.6 TFLOP/s on the same die), and a cold
# GPU scores higher than a warm one (mamf-finder warms up 30 s for this reason): 3%.
GEMM_SPREAD = 0.03
# torch dtype names mamf-finder takes (`--dtype`) and the catalog peak each maps to: BF16 / FP16 share the dense
# 16-bit tensor-core peak (GPUSpec.bf16_tflops), the float8 formats the FP8 peak.
SIXTEEN_BIT = frozenset({"bfloat16", "float16", "half"})
FP8 = frozenset({"float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz"})
RING = frozenset({"all_reduce", "all_gather", "reduce_scatter"})
# Efficiency of each tier's line rate in the cost model [costmodel/constants.py]: a factor above 1 / efficiency
# means more than the line rate, which only in-network reduction (NVLink SHARP, SHARP) or NCCL's tree on two nodes
# reach [NT #290: 476 GB/s on one H100 node "using NVLink and NVLink SHARP"; NT #196: on two nodes the tree "can
# go beyond the network bottleneck"].
LINE_RATE_EFFICIENCY = {"nvlink": NVLINK_EFFICIENCY, "pcie": PCIE_EFFICIENCY, "network": NIC_EFFICIENCY}


class AcceptanceFigure(BaseModel):
    """One measured figure of a pool next to the cost model's sourced value for it."""

    model_config = ConfigDict(frozen=True)

    quantity: str = Field(description="What was measured: 'bus bandwidth', 'latency' or 'matmul rate'.")
    tier: str = Field(description="The fabric level that binds it (nvlink, pcie, network, inter-pod) or 'gpu'.")
    unit: str = Field(description="Unit of measured, sourced and modelled: GB/s (1e9 B/s), us or TFLOP/s.")
    measured: float = Field(description="The test's figure (plateau busbw, small-message time, best mean TFLOP/s).")
    sourced: float = Field(description="The cost model's figure from its sourced constants, same unit.")
    modelled: float | None = Field(
        default=None, description="The cost model's own pricing of the same collective (GB/s busbw), when it differs."
    )
    constant: str | None = Field(default=None, description="The constant this figure pins (None: shown only).")
    factor: float | None = Field(default=None, description="That constant's value (factor on the sourced value).")
    spread: float | None = Field(default=None, description="The factor's spread, log units (relative).")
    source: str = Field(description="The test, e.g. 'all_reduce_perf, 2 nodes x 8 GPUs'.")
    note: str = Field(default="", description="Caveats: a bound reached, in-network reduction, a tier not pinned.")

    @computed_field(description="Measured / sourced.")  # type: ignore[prop-decorator]
    @property
    def ratio(self) -> float:
        return self.measured / self.sourced if self.sourced > 0 else 0.0


@dataclass(frozen=True)
class PoolRun:
    """A parsed acceptance test and the pool it ran on."""

    pool: str
    run: TestRun

    @property
    def kind(self) -> Kind:
        return "gemm" if isinstance(self.run, GemmBenchRun) else "nccl-tests"

    @property
    def subject(self) -> str:
        """The collective (nccl-tests) or the dtype (GEMM)."""
        return self.run.dtype if isinstance(self.run, GemmBenchRun) else self.run.collective

    @property
    def key(self) -> tuple[str, str, str, bool]:
        """Tests with the same key measure the same thing: only the newest counts."""
        multi = isinstance(self.run, NcclTestRun) and self.run.multi_node
        return (self.pool, self.kind, self.subject, multi)


class Evaluation(BaseModel):
    """A cluster's acceptance tests evaluated: figures per test (in the order given), which tests are the newest of
    their key (and so set the priors), and the priors."""

    model_config = ConfigDict(frozen=True)

    pools: list[str] = Field(description="Per test, its pool.")
    figures: list[list[AcceptanceFigure]] = Field(description="Per test, its figures ([] when it cannot be read).")
    newest: list[bool] = Field(
        description="Per test: the newest of its pool, kind, subject and scope, and readable (it sets the priors)."
    )
    errors: list[str] = Field(description="Per test: why it could not be evaluated ('' when it was).")
    priors: Priors = Field(description="Pool -> constant -> prior, from the newest tests.")

    def table(self) -> dict[str, list[AcceptanceFigure]]:
        """Measured vs sourced per pool: the figures of the tests that set the priors."""
        out: dict[str, list[AcceptanceFigure]] = {}
        for pool, figs, newest in zip(self.pools, self.figures, self.newest, strict=True):
            if newest and figs:
                out.setdefault(pool, []).extend(figs)
        return out


def _pool(cluster: ClusterSpec, name: str) -> NodePool:
    try:
        return cluster.pool(name)
    except UnknownNameError:
        raise DomainError(
            "pool", f"no pool {name!r} in cluster; pools: {', '.join(p.name for p in cluster.pools)}"
        ) from None


def _check_gpu(reported: str | None, cluster: ClusterSpec, pool: NodePool, field: str) -> GPUSpec:
    """The pool's GPU; a DomainError when the test names a GPU of another type (another peak or family). A name the
    catalog does not know, or a pool of a user-defined type, is not checked."""
    gpu = cluster.gpu_of(pool)
    if reported is None or gpu.name not in BUILTIN_GPUS:
        return gpu
    try:
        ran = resolve_gpu(reported)
    except UnknownNameError:
        return gpu
    if (ran.family, ran.bf16_tflops) != (gpu.family, gpu.bf16_tflops):
        raise DomainError(
            field, f"the test ran on {reported!r} ({ran.name}); pool {pool.name!r} has {gpu.name}: wrong pool?"
        )
    return gpu


def run_levels(tiers: Sequence[Tier], gpus_per_node: int, per_host: int, hosts: int) -> tuple[Level, ...]:
    """The levels of `tiers` a run of `per_host` ranks on each of `hosts` nodes spans (ranks fill a node's first
    GPUs, hosts are consecutive nodes), with the members of each, as costmodel/network.group_levels splits a group."""
    levels: list[Level] = []
    below = 1
    for tier in tiers:
        if tier.unit == INF:
            inside = per_host * hosts
        elif tier.unit <= gpus_per_node:
            unit = int(tier.unit)
            inside = per_host if per_host <= unit else math.gcd(per_host, unit)
        else:  # a tier wider than a node (an NVL72 domain, a pod): whole hosts inside
            nodes = int(tier.unit // gpus_per_node)
            inside = per_host * (hosts if hosts <= nodes else math.gcd(hosts, nodes))
        if inside > below:
            levels.append(Level(max(1, inside // below), tier.bw, tier.network, tier.name))
            below = inside
        if below >= per_host * hosts:
            break
    return tuple(levels)


def _level_bounds(collective: str, levels: Sequence[Level], per_host: int) -> list[float]:
    """The bus bandwidth (B/s) each level allows the collective (see the module docstring)."""
    n = math.prod(lv.members for lv in levels)
    out: list[float] = []
    inner = 1
    for lv in levels:
        inner *= lv.members
        if collective in RING:
            # A ring's busbw is its slowest link's rate [NT doc/PERFORMANCE.md]; across nodes one ring channel per
            # NIC, so the node's NICs together (each rank's share x ranks per node) [NT #160].
            out.append(lv.bw * (per_host if lv.network else 1))
        elif collective == "alltoall":
            # Each rank sends the share of its buffer that leaves the level over its own share of the level
            # [costmodel/network.all_to_all]; busbw = size / time x (n-1)/n [NT src/alltoall.cu AlltoAllGetBw].
            leaving = (inner - inner // lv.members) / n
            out.append(lv.bw * ((n - 1) / n) / leaving)
        else:
            # sendrecv: rank r sends to r+1; busbw = algbw [NT src/sendrecv.cu]: the slowest pair's link, one GPU's
            # share of it [costmodel/network.p2p].
            out.append(lv.bw)
    return out


def _modelled_busbw(collective: str, levels: tuple[Level, ...], nbytes: float) -> float:
    """The cost model's own pricing of one nccl-tests row, as nccl-tests reports it (busbw, GB/s)."""
    t = _modelled_time(collective, levels, nbytes)
    n = math.prod(lv.members for lv in levels)
    factor = {"all_reduce": 2 * (n - 1) / n, "sendrecv": 1.0}.get(collective, (n - 1) / n)  # NT src/*.cu GetBw
    return nbytes / t * factor / 1e9


def _modelled_time(collective: str, levels: tuple[Level, ...], nbytes: float) -> float:
    if collective == "all_reduce":
        return all_reduce(levels, nbytes)
    if collective in ("all_gather", "reduce_scatter"):
        return all_gather(levels, nbytes)  # nccl-tests' size is the full gathered (scattered) buffer
    if collective == "alltoall":
        return all_to_all(levels, nbytes)
    return max(p2p(lv.bw, lv.network, nbytes) for lv in levels)


def _plateau(run: NcclTestRun) -> list[NcclRow]:
    return sorted(run.rows, key=lambda r: r.size_bytes)[-PLATEAU_ROWS:]


def _plateau_spread(run: NcclTestRun) -> float:
    """Log-scale scatter of the plateau's bus bandwidths (out-of-place and in-place)."""
    values = [v for r in _plateau(run) for v in (r.busbw_gbs, r.in_place_busbw_gbs) if v is not None and v > 0]
    return statistics.pstdev(math.log(v) for v in values) if len(values) > 1 else 0.0


def check_nccl(run: NcclTestRun, cluster: ClusterSpec, pool_name: str) -> tuple[NodePool, int]:
    """The pool and the ranks per node; a DomainError when the run cannot be read against this pool."""
    pool = _pool(cluster, pool_name)
    _check_gpu(run.gpu, cluster, pool, NCCL_FIELD)
    hosts = len(run.hosts)
    if run.ranks < 2:
        raise DomainError(NCCL_FIELD, f"the run has {run.ranks} rank: a collective needs at least 2")
    if hosts > pool.node_count:
        raise DomainError(NCCL_FIELD, f"the run spans {hosts} hosts; pool {pool.name!r} has {pool.node_count} nodes")
    if run.ranks % hosts:
        raise DomainError(NCCL_FIELD, f"{run.ranks} ranks on {hosts} hosts: not the same number on each")
    per_host = run.ranks // hosts
    if per_host > pool.gpus_per_node:
        raise DomainError(
            NCCL_FIELD, f"{per_host} ranks per host; pool {pool.name!r} has {pool.gpus_per_node} GPUs per node"
        )
    largest = max(r.size_bytes for r in run.rows)
    if largest < MIN_LARGEST_BYTES:
        raise DomainError(
            NCCL_FIELD,
            f"the largest message is {largest} B: below the bus bandwidth's plateau; run up to at least 128 MiB "
            "(-e 128M, better -e 8G)",
        )
    if run.peak_busbw_gbs() <= 0:
        raise DomainError(NCCL_FIELD, "the bus bandwidth of the largest messages is 0: the run measured nothing")
    return pool, per_host


NVLS_FAMILIES = frozenset({"hopper", "blackwell", "blackwell-ultra"})
"""GPU generations whose NVSwitch systems have multicast, on which NCCL (2.17 and later) runs a single-node
all_reduce as NVLS by default [NCCL src/transport/nvls.cc ncclNvlsInit: CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED;
NVIDIA Hopper architecture whitepaper: NVLink SHARP in third-generation NVSwitch]."""


def runs_nvls(run: NcclTestRun, cluster: ClusterSpec, pool: NodePool) -> bool:
    """Whether NCCL runs this test's all_reduce on NVLink SHARP: inside one NVSwitch domain (more than the two GPUs
    an NVLink bridge joins) of a generation with multicast. all_gather and reduce_scatter over NVLS keep the
    links' rate in NCCL's own model ((ppn - 1) / ppn, src/graph/tuning.cc), so only all_reduce is inflated."""
    fabric = cluster.fabric_of(pool)
    return (
        run.collective == "all_reduce"
        and cluster.gpu_of(pool).family in NVLS_FAMILIES
        and fabric.kind == "nvlink"
        and (fabric.domain_size or 0) > 2
        and run.ranks > 2
    )


def nccl_figures(
    run: NcclTestRun, cluster: ClusterSpec, pool_name: str, intra_factor: float = 1.0
) -> list[AcceptanceFigure]:
    """The run's plateau bus bandwidth and small-message latency against the cost model's (see the module
    docstring); `intra_factor` is the pool's intra-node factor, which a multi-node run's intra-node levels take."""
    pool, per_host = check_nccl(run, cluster, pool_name)
    hosts = len(run.hosts)
    fabric = cluster.fabric_of(pool)
    sourced_levels = run_levels(pool_tiers(pool, fabric), pool.gpus_per_node, per_host, hosts)
    levels = run_levels(
        pool_tiers(pool, fabric, PoolCalibration(intra_node=intra_factor)), pool.gpus_per_node, per_host, hosts
    )
    constant = "network" if any(lv.network for lv in levels) else "intra_node"
    pinned = [lv.network == (constant == "network") for lv in levels]
    sourced_bounds = _level_bounds(run.collective, sourced_levels, per_host)
    bounds = _level_bounds(run.collective, levels, per_host)
    tier_bound, tier = min((b, lv.name) for b, lv, p in zip(sourced_bounds, levels, pinned, strict=True) if p)
    other = (
        min((b, lv.name) for b, lv, p in zip(bounds, levels, pinned, strict=True) if not p) if not all(pinned) else None
    )
    measured = run.peak_busbw_gbs()
    sourced = tier_bound / 1e9
    source = f"{run.collective}_perf, {hosts} node{'s' if hosts > 1 else ''} x {per_host} GPUs"
    factor: float | None = measured / sourced
    note = ""
    if other is not None and measured * 1e9 >= other[0]:
        factor = None
        note = (
            f"bound by {other[1]} in the cost model ({other[0] / 1e9:.0f} GB/s, with the pool's intra-node factor "
            f"{intra_factor:.2f}): pins no {constant} constant"
        )
    if factor is not None and constant == "intra_node" and runs_nvls(run, cluster, pool):
        factor = None  # [issue 48 §7: it pinned intra_node = 1.33, which every later TP collective then used]
        note = (
            "NCCL runs this all_reduce as NVLink SHARP (NVLS: the switch reduces, NCCL's model doubles the busbw; "
            "NCCL_NVLS_ENABLE defaults on where the GPUs have multicast, src/transport/nvls.cc, src/graph/tuning.cc), "
            "which the cost model does not price: pins no intra_node constant; all_gather_perf or reduce_scatter_perf "
            "(or NCCL_NVLS_ENABLE=0) measure the NVLink links"
        )
    if factor is not None and factor > 1 / LINE_RATE_EFFICIENCY.get(tier, 1.0):
        factor = None  # faster than the links can carry: an algorithm the cost model does not price ran
        note = f"above {tier}'s line rate, so it pins no {constant} constant: " + (
            "NCCL's tree on two nodes or in-network reduction (SHARP) [NT #196]; NCCL_ALGO=RING or "
            "all_gather_perf measure the NICs alone"
            if constant == "network"
            else "NVLink SHARP (NVLS) in-switch reduction [NT #290]; all_gather_perf measures the links alone"
        )
    if factor is not None:
        lo, hi = BOUNDS[constant]
        if not lo <= factor <= hi:
            note = f"{factor:.2f} x the sourced bandwidth, held at the bound {min(hi, max(lo, factor)):g}"
            factor = min(hi, max(lo, factor))
    modelled = statistics.median(_modelled_busbw(run.collective, sourced_levels, r.size_bytes) for r in _plateau(run))
    figures = [
        AcceptanceFigure(
            quantity="bus bandwidth",
            tier=tier,
            unit="GB/s",
            measured=measured,
            sourced=sourced,
            modelled=modelled,
            constant=constant if factor is not None else None,
            factor=factor,
            spread=min(2.0, math.hypot(RUN_TO_RUN_SPREAD, _plateau_spread(run))) if factor is not None else None,
            source=source,
            note=note,
        )
    ]
    latency = run.latency_us()
    small = [r for r in run.rows if r.size_bytes > 0 and r.time_us == latency]
    if small:
        row = small[0]
        figures.append(
            AcceptanceFigure(
                quantity="latency",
                tier=sourced_levels[-1].name,
                unit="us",
                measured=row.time_us,
                sourced=_modelled_time(run.collective, sourced_levels, row.size_bytes) * 1e6,
                source=f"{source}, {row.size_bytes} B",
                note="NCCL's protocol latencies [costmodel/constants.NCCL_PROTOCOLS]; shown, not fitted",
            )
        )
    return figures


def check_gemm(run: GemmBenchRun, cluster: ClusterSpec, pool_name: str) -> tuple[NodePool, GPUSpec, bool]:
    """The pool, its GPU and whether the dtype is FP8; a DomainError when the run cannot be read against it."""
    pool = _pool(cluster, pool_name)
    gpu = _check_gpu(run.device, cluster, pool, GEMM_FIELD)
    if run.dtype in FP8:
        if gpu.fp8_tflops is None:
            raise DomainError(GEMM_FIELD, f"dtype {run.dtype}: {gpu.name} has no FP8 peak in the catalog")
        return pool, gpu, True
    if run.dtype not in SIXTEEN_BIT:
        raise DomainError(
            GEMM_FIELD,
            f"dtype {run.dtype}: the cost model sources no matmul rate for it; run mamf-finder with --dtype "
            "bfloat16 (or float8_e4m3fn)",
        )
    return pool, gpu, False


def gemm_figures(run: GemmBenchRun, cluster: ClusterSpec, pool_name: str) -> list[AcceptanceFigure]:
    """The sweep's best mean TFLOP/s against the GPU's sourced achievable matmul rate."""
    _pool_row, gpu, fp8 = check_gemm(run, cluster, pool_name)
    peak = peak_flops(gpu, fp8) / 1e12
    # The sourced achievable rate: peak x the catalog's MAMF fraction [ST], x FP8's lower share [constants].
    sourced = peak * gpu.mamf_fraction * (FP8_MAMF_RATIO if fp8 else 1.0)
    measured = run.mamf_tflops
    factor = measured / sourced
    lo, hi = BOUNDS["compute"]
    note = f"{measured / peak:.0%} of the {peak:g} TFLOP/s peak; the catalog sources {sourced / peak:.0%} [ST]"
    if not lo <= factor <= hi:
        note += f"; {factor:.2f} x sourced held at the bound"
        factor = min(hi, max(lo, factor))
    return [
        AcceptanceFigure(
            quantity=f"matmul rate ({run.dtype})",
            tier="gpu",
            unit="TFLOP/s",
            measured=measured,
            sourced=sourced,
            constant="compute",
            factor=factor,
            spread=GEMM_SPREAD,
            source=f"mamf-finder {run.dtype}, {measured:.1f} TFLOPS @ {run.best_mean.shape}",
            note=note,
        )
    ]


def figures_of(test: PoolRun, cluster: ClusterSpec, intra_factor: float = 1.0) -> list[AcceptanceFigure]:
    """A test's figures (a DomainError when it cannot be read against its pool)."""
    if isinstance(test.run, GemmBenchRun):
        return gemm_figures(test.run, cluster, test.pool)
    return nccl_figures(test.run, cluster, test.pool, intra_factor)


def combine(figures: Sequence[AcceptanceFigure]) -> Prior:
    """One prior from the figures that pin one constant of one pool: their geometric mean weighted by precision;
    the spread no smaller than the smallest one's (tests of one session share their systematic error) and no
    smaller than their disagreement."""
    pinned = [(f.factor, f.spread or RUN_TO_RUN_SPREAD, f.source) for f in figures if f.factor is not None]
    weights = [1 / s**2 for _, s, _ in pinned]
    logs = [math.log(v) for v, _, _ in pinned]
    centre = sum(w * x for w, x in zip(weights, logs, strict=True)) / sum(weights)
    spread = max(min(s for _, s, _ in pinned), statistics.pstdev(logs) if len(logs) > 1 else 0.0)
    return Prior(value=math.exp(centre), spread=min(2.0, spread), source="; ".join(src for _, _, src in pinned))


def _priors(figures: Sequence[Sequence[AcceptanceFigure]], tests: Sequence[PoolRun], use: Sequence[bool]) -> Priors:
    by_constant: dict[tuple[str, str], list[AcceptanceFigure]] = {}
    for figs, test, used in zip(figures, tests, use, strict=True):
        for f in figs if used else []:
            if f.constant is not None and f.factor is not None:
                by_constant.setdefault((test.pool, f.constant), []).append(f)
    priors: Priors = {}
    for (pool, constant), figs in by_constant.items():
        priors.setdefault(pool, {})[constant] = combine(figs)
    return priors


def evaluate(tests: Sequence[PoolRun], cluster: ClusterSpec) -> Evaluation:
    """Figures and priors of a cluster's acceptance tests, given newest first: the newest test of each key sets
    the priors; intra-node tests first, so that multi-node tests read the network with the pool's intra-node
    factor. A test that no longer matches the inventory (its pool removed or changed) keeps no figures."""
    first: dict[tuple[str, str, str, bool], int] = {}
    for i, t in enumerate(tests):
        first.setdefault(t.key, i)
    newest = [first[t.key] == i for i, t in enumerate(tests)]

    def attempt(t: PoolRun, intra: float) -> tuple[list[AcceptanceFigure], str]:
        try:
            return figures_of(t, cluster, intra), ""
        except DomainError as exc:
            return [], str(exc)

    # Intra-node factors first (a test that pins intra_node does not depend on it), then every test with them.
    first_pass = [attempt(t, 1.0)[0] if n else [] for t, n in zip(tests, newest, strict=True)]
    intra = {
        pool: consts["intra_node"].value
        for pool, consts in _priors(first_pass, tests, newest).items()
        if "intra_node" in consts
    }
    done = [attempt(t, intra.get(t.pool, 1.0)) for t in tests]
    figures = [f for f, _ in done]
    usable = [n and not e for n, (_, e) in zip(newest, done, strict=True)]
    return Evaluation(
        pools=[t.pool for t in tests],
        figures=figures,
        newest=usable,
        errors=[e for _, e in done],
        priors=_priors(figures, tests, usable),
    )
