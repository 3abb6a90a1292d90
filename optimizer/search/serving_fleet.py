"""SLA plans: how many replicas of which shape, on which pools, serve a request rate within TTFT and TPOT targets
(objective gpus or cost), or the most requests per second the allowed GPUs serve (objective max_rate).

Decomposition: every replica shape (pool, tp, pp, ep; and for disaggregated serving a prefill or a decode role)
is priced by the steady-state model (costmodel/serving_load.py) as the highest rate it sustains within the
targets; CP-SAT then chooses integer replica counts. Load is spread in proportion to capacity, so a replica runs
at most at its SLA rate. Aggregated and disaggregated fleets are solved separately; `auto` keeps the better and
says by how much.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from optimizer.costmodel import network as net
from optimizer.costmodel.inference import kv_bytes_per_token_per_layer
from optimizer.costmodel.serving_load import PrefillLoad, ReplicaLoad
from optimizer.errors import DomainError
from optimizer.frameworks.validation import validate
from optimizer.search.cpsat import cp_model
from optimizer.search.fleet_result import FleetGroup, FleetPlan, ReplicaShape
from optimizer.search.request import SearchRequest
from optimizer.search.result import Progress, ProgressFn
from optimizer.search.solver_params import fleet_solver
from optimizer.search.space import SearchSpace
from optimizer.spec.cluster_spec import ClusterSpec, NodePool
from optimizer.spec.model_spec import ModelSpec
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import BYTES, InferenceWorkload

RATE_UNIT = 1e-4  # rates are integers in units of 1e-4 requests/s in the CP-SAT model (rounded down: safe)
PRICE_UNIT = 1e-6  # prices per hour in units of 1e-6


@dataclass
class _Shapes:
    """The priced shapes of one role set."""

    shapes: list[ReplicaShape] = field(default_factory=list)
    configs: list[ParallelConfig] = field(default_factory=list)


class FleetSearch:
    """The search state of one SLA plan."""

    def __init__(
        self,
        model: ModelSpec,
        cluster: ClusterSpec,
        w: InferenceWorkload,
        space: SearchSpace,
        *,
        deadline: float = math.inf,
        cancelled: Callable[[], bool] | None = None,
        progress: ProgressFn | None = None,
    ) -> None:
        self.model, self.cluster, self.w, self.space = model, cluster, w, space
        self.deadline, self.cancelled, self.progress = deadline, cancelled, progress
        self.started = time.perf_counter()
        self.priced = 0
        self.stopped: str | None = None
        """Why pricing stopped early ("cancelled" or "time limit"); None when every shape was priced."""
        names = space.pools or tuple(p.name for p in cluster.pools)
        self.pools = [cluster.pool(n) for n in names if cluster.pool(n).healthy_gpus > 0]
        if not self.pools:
            raise DomainError("pools", "the allowed pools have no healthy GPU")
        if w.objective == "cost":
            unpriced = [p.name for p in self.pools if p.price_per_gpu_hour is None]
            if unpriced:
                raise DomainError(
                    "pools.price_per_gpu_hour",
                    f"objective cost needs a price on every allowed pool; {', '.join(unpriced)} has none",
                )
        self.ttft_s = None if w.ttft_ms is None else w.ttft_ms / 1000
        self.tpot_s = None if w.tpot_ms is None else w.tpot_ms / 1000
        self.fastest_ttft: tuple[float, str] = (math.inf, "")
        self.fastest_tpot: tuple[float, str] = (math.inf, "")

    # ---- control ------------------------------------------------------------------------------------------
    def _go_on(self) -> bool:
        """Count one priced shape, report progress, and say whether to go on (not cancelled, within the limit)."""
        if self.stopped is not None:
            return False
        self.priced += 1
        if self.progress is not None:
            self.progress(Progress(None, 0.0, time.perf_counter() - self.started, self.priced))
        if self.cancelled is not None and self.cancelled():
            self.stopped = "cancelled"
        elif time.perf_counter() > self.deadline:
            self.stopped = "time limit"
        return self.stopped is None

    # ---- shapes -------------------------------------------------------------------------------------------
    def _configs(self, pool: NodePool) -> list[ParallelConfig]:
        """Replica shapes that fit one pool: tp within a node (TP traffic stays on NVLink / PCIe), pp over nodes;
        a replica fills whole nodes or divides one [vLLM distributed serving: TP = GPUs per node, PP = nodes]."""
        m, gpn = self.model, pool.gpus_per_node
        out = []
        for tp in range(1, gpn + 1):
            if gpn % tp or m.num_attention_heads % tp or not self.space.allows("tp", tp):
                continue
            if m.mla is None and m.kv_heads % tp and tp % m.kv_heads:
                continue
            for pp in (1, 2, 4, 8, 16):
                gpus = tp * pp
                if gpus > pool.healthy_gpus or pp > m.num_layers or not self.space.allows("pp", pp):
                    continue
                if gpus > gpn and gpus % gpn:
                    continue
                if pp > 1 and tp < gpn:
                    continue  # PP only across whole nodes
                eps = [1]
                if m.moe is not None and tp > 1 and m.moe.num_experts % tp == 0:
                    eps.append(tp)
                for ep in eps:
                    if self.space.allows("ep", ep):
                        out.append(ParallelConfig(tp=tp, pp=pp, ep=ep, etp=1 if ep > 1 else None))
        return out + self._wide_ep(pool)

    def _wide_ep(self, pool: NodePool) -> list[ParallelConfig]:
        """MoE replicas with attention data parallelism and experts spread over all their GPUs (ep = tp x dp over
        whole nodes, DeepSeek-V3 style [LMSYS large-scale EP blog 2025-05; SGLang --enable-dp-attention
        --moe-a2a-backend deepep]); the EP all-to-all runs under the other micro-batch's compute (two-batch
        overlap) where the engine has it."""
        m, gpn = self.model, pool.gpus_per_node
        if m.moe is None:
            return []
        out = []
        overlap = self.w.engine == "sglang"
        for tp in (1, 2, 4, 8):
            if tp > gpn or m.num_attention_heads % tp or not self.space.allows("tp", tp):
                continue
            nodes = 1
            while nodes * gpn <= pool.healthy_gpus:
                gpus = nodes * gpn
                dp, ep = gpus // tp, gpus
                if (
                    dp > 1
                    and m.moe.num_experts % ep == 0
                    and self.space.allows("ep", ep)
                    and self.space.allows("dp", dp)
                ):
                    out.append(ParallelConfig(tp=tp, dp=dp, ep=ep, etp=1, ep_comm_overlap=overlap))
                nodes *= 2
        return out

    def _shape(self, role: str, pool: NodePool, c: ParallelConfig, load: ReplicaLoad, rate: float) -> ReplicaShape:
        pt = load.steady(rate) if rate > 0 and role != "prefill" else None
        price = None if pool.price_per_gpu_hour is None else pool.price_per_gpu_hour * c.gpus
        return ReplicaShape(
            role=role,
            pool=pool.name,
            gpu=self.cluster.gpu_of(pool).name,
            tp=c.tp,
            pp=c.pp,
            dp=c.dp,
            ep=c.ep,
            overlap=c.ep_comm_overlap,
            gpus=c.gpus,
            rate=rate,
            ttft_p90_s=pt.ttft_p90_s if pt is not None and role == "replica" else None,
            tpot_s=pt.tpot_s if pt is not None else None,
            concurrency=pt.decoding if pt is not None else 0.0,
            kv_tokens=load.kv_tokens,
            kv_blocks=int(load.kv_tokens // load.limits.block_tokens),
            max_seqs=load.limits.max_seqs,
            max_batched_tokens=load.limits.max_batched_tokens,
            memory_fraction=load.limits.memory_fraction,
            price_per_hour=price,
        )

    def _note_fastest(self, load: ReplicaLoad, what: str) -> None:
        ttft = load.prefill_s(1.0) + load.iteration_s(1.0, 0.0) * 0.9
        tpot = load.iteration_s(1.0, 0.0)
        if ttft < self.fastest_ttft[0]:
            self.fastest_ttft = (ttft, what)
        if tpot < self.fastest_tpot[0]:
            self.fastest_tpot = (tpot, what)

    def candidates(self, aggregated: bool = False) -> list[tuple[NodePool, ParallelConfig]]:
        """Shapes to price. SGLang runs wide EP with DP attention only disaggregated: DeepEP's dispatch modes
        (normal for prefill, low-latency for decode) cannot share one device group under DP attention, which
        its auto mode does not support [LMSYS large-scale EP blog 2025-05, DeepEP mode table]."""
        out = [(pool, c) for pool in self.pools for c in self._configs(pool)]
        if aggregated and self.w.engine == "sglang":
            out = [(pool, c) for pool, c in out if not (c.dp > 1 and c.ep > 1)]
        return out

    def aggregated(self) -> _Shapes:
        """Replica shapes (prefill and decode together) and the rate each sustains within the targets."""
        out = _Shapes()
        for pool, c in self.candidates(aggregated=True):
            if not self._go_on():
                break
            load = self._load(pool, c, decode_only=False)
            if load is None:
                continue
            self._note_fastest(load, f"{self.cluster.gpu_of(pool).name} tp{c.tp} pp{c.pp}")
            rate = load.max_rate(self.ttft_s, self.tpot_s)
            if rate > 0:
                out.shapes.append(self._shape("replica", pool, c, load, rate))
                out.configs.append(c)
        return _best_per_size(out)

    def disaggregated(self) -> tuple[_Shapes, float]:
        """Prefill and decode shapes, and the worst KV transfer time among the prefill shapes."""
        out = _Shapes()
        worst_transfer = 0.0
        for pool, c in self.candidates():
            if not self._go_on():
                break
            load = self._load(pool, c, decode_only=False)
            dec = self._load(pool, c, decode_only=True)
            if load is None or dec is None:
                continue
            transfer = self.kv_transfer_s(pool, c)
            pre = PrefillLoad(load, transfer)
            rate = pre.max_rate(self.ttft_s)
            if rate > 0:
                worst_transfer = max(worst_transfer, transfer)
                shape = self._shape("prefill", pool, c, load, rate)
                at = pre.at_rate(rate * (1 - 1e-6))
                shape.ttft_p90_s = at.ttft_p90_s if at is not None else pre.single_s + transfer
                out.shapes.append(shape)
                out.configs.append(c)
            rate = dec.max_rate(None, self.tpot_s)
            if rate > 0:
                out.shapes.append(self._shape("decode", pool, c, dec, rate))
                out.configs.append(c)
        return _best_per_size(out), worst_transfer

    def _load(self, pool: NodePool, c: ParallelConfig, *, decode_only: bool) -> ReplicaLoad | None:
        cfg = c.model_copy(update={"stage_pools": [pool.name] * c.pp})
        try:
            layout = validate(self.model, self.cluster, self.w, cfg)
        except DomainError:
            return None
        load = ReplicaLoad(self.model, self.cluster, self.w, cfg, layout, decode_only=decode_only)
        return load if load.max_decoding >= 1 else None

    def kv_transfer_s(self, pool: NodePool, c: ParallelConfig) -> float:
        """One prompt's KV cache from a prefill instance to a decode instance over the network, each GPU sending
        its own shard in parallel [DistServe §4.3; SGLang / Mooncake transfer engine: RDMA per GPU]. The decode
        instance may sit on any allowed pool, so the slower end's NIC sets the rate."""
        m, w = self.model, self.w
        per_gpu = w.prompt_len * (m.num_layers / c.pp) * kv_bytes_per_token_per_layer(m, c.tp, BYTES[w.kv_cache_dtype])
        bw = min(net.cluster_tiers(self.cluster, p)[-1].bw for p in (pool, *self.pools))
        return net.p2p(bw, True, per_gpu)


def _best_per_size(s: _Shapes) -> _Shapes:
    """Dominance: among shapes of one role and pool with the same GPU count, only the highest rate can be in an
    optimal fleet (swapping it in keeps every constraint and the objective)."""
    best: dict[tuple[str, str, int], int] = {}
    for i, sh in enumerate(s.shapes):
        key = (sh.role, sh.pool, sh.gpus)
        if key not in best or sh.rate > s.shapes[best[key]].rate:
            best[key] = i
    keep = sorted(best.values())
    return _Shapes([s.shapes[i] for i in keep], [s.configs[i] for i in keep])


class _Vars:
    """Replica counts; owns extraction."""

    def __init__(self, m: cp_model.CpModel, shapes: list[ReplicaShape], pools: list[NodePool]) -> None:
        cap = {p.name: p.healthy_gpus for p in pools}
        self.count = [m.new_int_var(0, cap[s.pool] // s.gpus, f"n{i}") for i, s in enumerate(shapes)]

    def extract(self, solver: cp_model.CpSolver, shapes: list[ReplicaShape]) -> list[FleetGroup]:
        return [
            FleetGroup(shape=s, count=int(solver.value(n)))
            for s, n in zip(shapes, self.count, strict=True)
            if solver.value(n)
        ]


@dataclass(frozen=True)
class FleetSolve:
    status: str
    groups: list[FleetGroup]
    objective: float | None
    bound: float | None


class FleetModel:
    """CP-SAT model of one fleet: integer replicas per shape."""

    def __init__(
        self,
        shapes: list[ReplicaShape],
        pools: list[NodePool],
        roles: tuple[str, ...],
        w: InferenceWorkload,
        budget: int | None = None,
    ) -> None:
        self.shapes, self.pools, self.roles, self.w, self.budget = shapes, pools, roles, w, budget
        self.m = cp_model.CpModel()
        self.v = _Vars(self.m, shapes, pools)
        self.served: cp_model.IntVar | None = None
        self._pool_capacity()
        self._gpu_budget()
        self._rate_coverage()
        self._objective()

    def _pool_capacity(self) -> None:
        """Rule: a pool's replicas use at most its healthy GPUs."""
        for pool in self.pools:
            terms = [n * s.gpus for n, s in zip(self.v.count, self.shapes, strict=True) if s.pool == pool.name]
            if terms:
                self.m.add(sum(terms) <= pool.healthy_gpus)

    def _gpu_budget(self) -> None:
        """Rule: the fleet uses at most the search space's GPU budget (max_gpus), when one is set."""
        if self.budget is not None:
            self.m.add(sum(n * s.gpus for n, s in zip(self.v.count, self.shapes, strict=True)) <= self.budget)

    def _rate_coverage(self) -> None:
        """Rule: every role's replicas together sustain the served rate (each request is prefilled once and
        decoded once)."""
        top = sum(
            math.floor(s.rate / RATE_UNIT) * (p.healthy_gpus // s.gpus)
            for s in self.shapes
            for p in self.pools
            if p.name == s.pool
        )
        self.served = self.m.new_int_var(0, max(0, top), "served")
        if self.w.rate is not None:
            self.m.add(self.served >= math.ceil(self.w.rate / RATE_UNIT))
        for role in self.roles:
            terms = [
                n * math.floor(s.rate / RATE_UNIT)
                for n, s in zip(self.v.count, self.shapes, strict=True)
                if s.role == role
            ]
            self.m.add(sum(terms) >= self.served)

    def _objective(self) -> None:
        """gpus: fewest GPUs; cost: lowest price per hour; max_rate: the most requests/s."""
        assert self.served is not None
        if self.w.objective == "max_rate":
            self.m.maximize(self.served)
        elif self.w.objective == "cost":
            self.m.minimize(
                sum(
                    n * round((s.price_per_hour or 0.0) / PRICE_UNIT)
                    for n, s in zip(self.v.count, self.shapes, strict=True)
                )
            )
        else:
            self.m.minimize(sum(n * s.gpus for n, s in zip(self.v.count, self.shapes, strict=True)))

    def solve(self, time_limit_s: float) -> FleetSolve:
        solver = fleet_solver(time_limit_s)
        status = solver.solve(self.m)
        name = solver.status_name(status)
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return FleetSolve(name, [], None, None)
        scale = RATE_UNIT if self.w.objective == "max_rate" else PRICE_UNIT if self.w.objective == "cost" else 1.0
        return FleetSolve(
            name,
            self.v.extract(solver, self.shapes),
            solver.objective_value * scale,
            solver.best_objective_bound * scale,
        )


def validate_fleet(
    groups: list[FleetGroup], pools: list[NodePool], w: InferenceWorkload, roles: tuple[str, ...]
) -> None:
    """Solver-agnostic check of a fleet: pool capacity and rate coverage (raises AssertionError naming the rule)."""
    for pool in pools:
        used = sum(g.count * g.shape.gpus for g in groups if g.shape.pool == pool.name)
        assert used <= pool.healthy_gpus, f"pool capacity: {pool.name} uses {used} of {pool.healthy_gpus} GPUs"
    if w.rate is not None:
        for role in roles:
            have = sum(g.count * g.shape.rate for g in groups if g.shape.role == role)
            assert have >= w.rate * (1 - 1e-9) - RATE_UNIT, (
                f"rate coverage: {role} replicas sustain {have:.4g} < {w.rate}"
            )


def summarise(mode: str, groups: list[FleetGroup], w: InferenceWorkload, transfer: float | None) -> FleetPlan:
    """The fleet in serving words at its planned load."""
    gpus = sum(g.count * g.shape.gpus for g in groups)
    roles = ("prefill", "decode") if mode == "disaggregated" else ("replica",)
    capacity = min(sum(g.count * g.shape.rate for g in groups if g.shape.role == r) for r in roles)
    served = w.rate if w.rate is not None else capacity
    priced = all(g.shape.price_per_hour is not None for g in groups)
    price = sum(g.count * (g.shape.price_per_hour or 0.0) for g in groups) if priced else None
    out_per_s = served * w.output_len
    ttft = max((g.shape.ttft_p90_s or 0.0) for g in groups)
    tpot = max((g.shape.tpot_s or 0.0) for g in groups)
    return FleetPlan(
        mode=mode,
        groups=groups,
        gpus=gpus,
        capacity_rate=capacity,
        served_rate=served,
        ttft_p90_s=ttft,
        tpot_s=tpot,
        output_tokens_per_s_per_gpu=out_per_s / gpus if gpus else 0.0,
        price_per_hour=price,
        price_per_million_tokens=None if price is None or out_per_s <= 0 else price / (out_per_s * 3600) * 1e6,
        kv_transfer_s=transfer,
        why="",
    )


@dataclass
class FleetOutcome:
    """What plan_fleet found: the chosen fleet (if any), each mode's status, and the search's facts."""

    plan: FleetPlan | None
    status: str
    objective_value: float | None
    lower_bound: float | None
    shapes_priced: int
    elapsed_s: float
    reason: str | None = None
    field: str | None = None


def plan_fleet(req: SearchRequest[InferenceWorkload]) -> FleetOutcome:
    """The SLA fleet: aggregated, disaggregated, or the better of the two (w.disaggregation). A cancelled or
    timed-out search answers UNKNOWN, never INFEASIBLE."""
    model, cluster, w, space, time_limit_s = req.model, req.cluster, req.workload, req.space, req.time_limit_s
    progress, cancelled = req.progress, req.cancelled
    t0 = time.perf_counter()
    search = FleetSearch(model, cluster, w, space, deadline=t0 + time_limit_s, cancelled=cancelled, progress=progress)
    results: dict[str, tuple[FleetSolve, _Shapes, float | None]] = {}
    priced = 0
    if w.disaggregation in ("auto", "off"):
        agg = search.aggregated()
        priced += len(agg.shapes)
        if agg.shapes:
            left = max(0.05, time_limit_s - (time.perf_counter() - t0))
            results["aggregated"] = (
                FleetModel(agg.shapes, search.pools, ("replica",), w, space.max_gpus).solve(left),
                agg,
                None,
            )
    if w.disaggregation in ("auto", "on"):
        dis, transfer = search.disaggregated()
        priced += len(dis.shapes)
        if {s.role for s in dis.shapes} == {"prefill", "decode"}:
            left = max(0.05, time_limit_s - (time.perf_counter() - t0))
            results["disaggregated"] = (
                FleetModel(dis.shapes, search.pools, ("prefill", "decode"), w, space.max_gpus).solve(left),
                dis,
                transfer,
            )
    elapsed = time.perf_counter() - t0
    if search.stopped is not None:
        return FleetOutcome(None, "UNKNOWN", None, None, search.priced, elapsed, search.stopped)
    solved = {k: v for k, v in results.items() if v[0].groups}
    if not solved:
        return _no_fleet(search, results, priced, elapsed)
    better = max if w.objective == "max_rate" else min
    mode = better(solved, key=lambda k: solved[k][0].objective or 0.0)
    res, _, kv_transfer = solved[mode]
    roles = ("prefill", "decode") if mode == "disaggregated" else ("replica",)
    validate_fleet(res.groups, search.pools, w, roles)
    fleet = summarise(mode, res.groups, w, kv_transfer)
    fleet.why = _why(mode, solved, w)
    proven = all(v[0].status == "OPTIMAL" for v in results.values())
    return FleetOutcome(
        fleet,
        "OPTIMAL" if proven else "FEASIBLE",
        res.objective,
        res.bound if not proven else res.objective,
        priced,
        elapsed,
    )


def _why(mode: str, solved: dict[str, tuple[FleetSolve, _Shapes, float | None]], w: InferenceWorkload) -> str:
    unit = {"gpus": "GPUs", "cost": "per hour", "max_rate": "requests/s"}[w.objective]
    other = "aggregated" if mode == "disaggregated" else "disaggregated"
    mine = solved[mode][0].objective or 0.0
    if other not in solved:
        if w.disaggregation != "auto":
            return f"{mode} serving as asked (disaggregation={w.disaggregation})"
        return f"{mode}: no {other} fleet meets the targets"
    theirs = solved[other][0].objective or 0.0
    # The change is relative to the fleet it is compared with (140 against 33 requests/s is 319% more, not 76%).
    pct = abs(mine - theirs) / theirs * 100 if theirs else 0.0
    word = "more" if w.objective == "max_rate" else "less"
    return f"{mode}: {mine:.4g} {unit} against {theirs:.4g} {unit} {other} ({pct:.1f}% {word})"


def _no_fleet(
    search: FleetSearch, results: dict[str, tuple[FleetSolve, _Shapes, float | None]], priced: int, elapsed: float
) -> FleetOutcome:
    """No fleet: name the bound that makes it so and the smallest relaxation."""
    w = search.w
    if any(v[0].status not in ("INFEASIBLE", "OPTIMAL") for v in results.values()):
        return FleetOutcome(None, "UNKNOWN", None, None, priced, elapsed, "the search stopped at its time limit")
    if not results:
        ttft, where = search.fastest_ttft
        tpot, where_t = search.fastest_tpot
        if search.ttft_s is not None and ttft > search.ttft_s:
            reason = (
                f"TTFT p90 <= {w.ttft_ms:g} ms is below one {w.prompt_len}-token prefill on the fastest allowed "
                f"replica ({where}: {ttft * 1000:.1f} ms at no load); relax ttft_ms to at least {ttft * 1000:.1f}"
            )
            return _infeasible(reason, "ttft_ms", priced, elapsed)
        if search.tpot_s is not None and tpot > search.tpot_s:
            reason = (
                f"TPOT <= {w.tpot_ms:g} ms is below one decode step on the fastest allowed replica ({where_t}: "
                f"{tpot * 1000:.2f} ms at batch 1); relax tpot_ms to at least {tpot * 1000:.2f}"
            )
            return _infeasible(reason, "tpot_ms", priced, elapsed)
        return _infeasible("no replica shape fits the model in the allowed pools", "pools", priced, elapsed)
    # Shapes exist but the GPUs cannot carry the rate: the most they carry, and what more it takes.
    best_rate = 0.0
    need = math.inf
    for shapes in (v[1] for v in results.values()):
        w_max = w.model_copy(update={"rate": None, "objective": "max_rate"})
        roles = tuple(sorted({s.role for s in shapes.shapes}))
        res = FleetModel(shapes.shapes, search.pools, roles, w_max, search.space.max_gpus).solve(1.0)
        best_rate = max(best_rate, res.objective or 0.0)
        assert w.rate is not None
        per_gpu = {r: max((s.rate / s.gpus for s in shapes.shapes if s.role == r), default=0.0) for r in roles}
        if all(per_gpu.values()):
            need = min(need, sum(w.rate / rate for rate in per_gpu.values()))
    more = f"; or about {math.ceil(need)} GPUs in all of the best replica shape" if math.isfinite(need) else ""
    reason = (
        f"the allowed GPUs sustain at most {best_rate:.4g} requests/s within the targets; relax rate to "
        f"{best_rate:.4g}{more}"
    )
    return _infeasible(reason, "rate", priced, elapsed)


def _infeasible(reason: str, field: str, priced: int, elapsed: float) -> FleetOutcome:
    """No fleet meets the SLA: the bound, and the field whose relaxation would make one exist."""
    return FleetOutcome(None, "INFEASIBLE", None, None, priced, elapsed, reason, field)
