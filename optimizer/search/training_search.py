"""The training search: branch and bound over the candidates' key batches in order of their lower bounds, a CP-SAT
stage layout for each candidate (stage_model.py), and its result with runners-up, explanation, placement and, when
nothing fits, the diagnosis. planner.py dispatches to it per framework and objective."""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable, Sequence

import numpy as np

from optimizer.costmodel.estimate import estimate
from optimizer.costmodel.goodput import failure_model
from optimizer.costmodel.result import Estimate
from optimizer.costmodel.uncertainty import memory_interval
from optimizer.placement.place import place
from optimizer.placement.priced import PlacedEstimate, placed_estimate
from optimizer.search.candidates import Candidate, KeyBatch, TrainingSpace
from optimizer.search.decision import RUNNERS_UP, contenders, decide, ratio_interval_pct, same_gpu
from optimizer.search.diagnosis import Probe, diagnose_infeasible
from optimizer.search.explain import explain
from optimizer.search.phase_clock import PhaseClock
from optimizer.search.pin_checks import check_pins
from optimizer.search.recipes import PricedRecipe, Refused, recipe_note
from optimizer.search.recipes import price as price_recipes
from optimizer.search.result import (
    Alternative,
    Explanation,
    PlannedConfig,
    PlanResult,
    Progress,
    ProgressFn,
    no_plan_within_limit,
    proven_bound,
    relative_gap,
)
from optimizer.search.stage_model import StageLayout, StageModel
from optimizer.spec.objectives import objective_name
from optimizer.spec.parallel_config import ParallelConfig

MAIN_KNOBS = (
    "tp",
    "pp",
    "dp",
    "cp",
    "cp_comm",
    "ep",
    "vp",
    "schedule",
    "zero_stage",
    "shard_group",
    "recompute",
    "mbs",
)
# The least share of the time limit the margin pass gets when the search proper used it all.
MARGIN_TIME_SHARE = 0.25
# (objective, config, estimate) of the plans kept, their placed estimates and their idealised step times.
Priced = tuple[list[tuple[float, ParallelConfig, Estimate]], list[PlacedEstimate | None], list[float]]
# Kinds of open items on the search heap (the third field; ties on bound and GPUs prefer key batches).
KEY_BATCH, STRUCTURE_UNTIGHTENED, STRUCTURE = 0, 1, 2


def _signature(c: ParallelConfig) -> tuple[object, ...]:
    return (c.tp, c.pp, c.dp, c.cp, c.ep)


class TrainingSearch:
    """Branch and bound over the training candidates, as explicit state.

    `heap` holds open items by lower bound (in the objective's unit): a layer key's candidate batch (KEY_BATCH) or
    one pool-block structure of a multi-pool candidate (in `pending`), first on its cheap bound
    (STRUCTURE_UNTIGHTENED), then on its layout bound from the stage tables (STRUCTURE). `found` keeps the best
    plan of each (tp, pp, dp, cp, ep); the search stops when the heap's top cannot beat the K-th best found
    (OPTIMAL), at the time limit or on cancellation (FEASIBLE with a gap, or UNKNOWN without a plan). A candidate's
    CP-SAT solve that stops before its proof is not exact: its bound joins `unproven` and the answer cannot read
    OPTIMAL below it.
    """

    def __init__(
        self,
        ts: TrainingSpace,
        top_k: int,
        time_limit_s: float,
        progress: ProgressFn | None,
        cancelled: Callable[[], bool] | None,
        first_feasible: bool,
        measured: Sequence[ParallelConfig] = (),
        interval_rule: bool = True,
        margin: float = 1.0,
    ) -> None:
        check_pins(ts)
        self.ts = ts
        self.top_k = top_k
        # Plans kept before the interval rule (optimizer/search/decision.py) picks and cuts them to top_k.
        self.keep = max(top_k, RUNNERS_UP) if interval_rule and not first_feasible else top_k
        self.measured = tuple(measured)
        self.interval_rule = interval_rule
        self.time_limit_s = time_limit_s
        self.progress = progress
        self.cancelled = cancelled
        self.first_feasible = first_feasible
        # Layouts must fit the GPU's memory divided by `margin` (stage_model.StageModel): 1 in the search proper,
        # the 80% memory interval's upper factor in the margin pass (margin_pass).
        self.margin = margin
        self.t0 = time.perf_counter()
        # Objective: step time, or price per step = step time x sum over stages of its GPUs x its pool's price
        # per GPU-second. Every bound is in the objective's unit: time bounds x the least price rate they allow.
        self.cost = ts.w.objective == "cost"  # check_request checked that every allowed pool has a price
        self.min_price = min((ts.cluster.price_per_s(1, [p.name]) or 0.0 for p in ts.pools), default=0.0)
        self.prices = {p.name: ts.cluster.price_per_s(1, [p.name]) or 0.0 for p in ts.pools}
        # Goodput: wall seconds per useful step = step time / goodput fraction (costmodel/goodput.py), a rate of at
        # least 1 per second of step time that depends on the candidate's nodes, spares and checkpoint shares; the
        # time bounds stay valid bounds on it (1 / fraction >= 1).
        self.goodput = ts.w.objective == "goodput"
        self.goodput_rates: dict[tuple[object, ...], float] = {}
        bound_of = (lambda k: ts.key_cost_bound(k, self.prices)) if self.cost else ts.key_bound
        self.keys = sorted(((bound_of(k), n, k) for n, k in enumerate(ts.layer_keys())), key=lambda x: x[:2])
        self.next_key = 0
        self.batches: list[KeyBatch] = []
        self.heap: list[tuple[float, int, int, int]] = []  # (bound, gpus, kind, index)
        self.pending: list[tuple[StageModel, tuple[int, ...], float]] = []  # (model, pools per stage, price rate)
        self.found: dict[tuple[object, ...], tuple[float, int, ParallelConfig]] = {}
        self.rates: dict[tuple[int, tuple[str, ...]], float] = {}  # memo of rate(): the same layouts recur
        self.unproven = math.inf  # least bound of the candidate solves that stopped before their proof
        self.total = 0
        self.solved = 0
        self.stopped: str | None = None  # "time limit" or "cancelled"
        self.clock = PhaseClock()
        self.margin_stopped: str | None = None  # why the margin pass stopped early ("time limit", "cancelled")

    # ---- bookkeeping ---------------------------------------------------------------------------------------------
    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def threshold(self) -> float:
        """The K-th best objective found, K the plans kept (an open item at or above it cannot enter them)."""
        vals = sorted(v[0] for v in self.found.values())
        return vals[self.keep - 1] if len(vals) >= self.keep else math.inf

    def limit_for(self, cand: Candidate) -> float:
        """What a candidate must beat to change the answer: the K-th best objective, and the best plan found of
        its own signature (the top K holds one plan per signature, so a candidate that cannot improve its
        signature's plan cannot change the list)."""
        thr = self.threshold()
        prev = self.found.get(_signature(cand.config))
        return thr if prev is None else min(thr, prev[0])

    def rate(self, gpus_per_stage: int, pools: tuple[str, ...], cfg: ParallelConfig | None = None) -> float:
        """Objective units per second of step time for a layout on these pools (1 for step time; for goodput the
        configuration `cfg` decides it, and without one its least value, 1)."""
        if self.goodput:
            return 1.0 if cfg is None else self.goodput_rate(cfg, pools)
        if not self.cost:
            return 1.0
        key = (gpus_per_stage, pools)
        hit = self.rates.get(key)
        if hit is None:
            hit = self.rates[key] = self.ts.cluster.price_per_s(gpus_per_stage, pools) or 0.0
        return hit

    def goodput_floor(self, gpus: np.ndarray) -> np.ndarray:
        """A least goodput rate (1 / fraction) for plans of `gpus` GPUs on the allowed pools: they use at least
        gpus / (the most GPUs per node) nodes at the least failure rate, and each failure costs at least the least
        recovery (a relaunch with NCCL initialisation, or an elastic recovery where a pool has one; no detection,
        checkpoint, rework, warm-up or wait), so fraction <= 1 / (1 + recovery / MTBF) (costmodel/goodput.py
        wall_shares with every other loss at 0)."""
        pools = self.ts.pools
        rels = [p.reliability_or_default for p in pools]
        per_node_day = min(sum(r.rates_per_node_day().values()) for r in rels)
        gpn = max(p.gpus_per_node for p in pools)
        nodes = np.ceil(gpus / gpn)
        restart = min(r.launch_s for r in rels) + min(r.nccl_init_s_per_1000_gpus for r in rels) * gpus / 1000
        elastic = [r.elastic_recovery_s for r in rels if r.recovery == "elastic"]
        if elastic:
            restart = np.minimum(restart, min(elastic))
        return 1.0 + restart * nodes * per_node_day / 86_400.0

    def goodput_rate(self, cfg: ParallelConfig, pools: tuple[str, ...]) -> float:
        """1 / goodput fraction of `cfg` on these stage pools (infinite when failures leave no useful time)."""
        key = (cfg.tp, cfg.pp, cfg.dp, cfg.cp, cfg.ep, cfg.zero_stage, pools)
        hit = self.goodput_rates.get(key)
        if hit is None:
            placed = cfg.model_copy(update={"stage_pools": list(pools)})
            fraction = failure_model(self.ts.model, self.ts.cluster, self.ts.w, placed, self.ts.fw.name).fraction
            hit = self.goodput_rates[key] = 1.0 / fraction if fraction > 0 else math.inf
        return hit

    def record(self, cand: Candidate, layers: tuple[int, ...], pools: tuple[str, ...], objective: float) -> None:
        cfg = cand.config.model_copy(update={"layers_per_stage": list(layers), "stage_pools": list(pools)})
        sig = _signature(cfg)
        prev = self.found.get(sig)
        if prev is None or (objective, cfg.gpus) < (prev[0], prev[1]):
            self.found[sig] = (objective, cfg.gpus, cfg)

    def take(self, cand: Candidate, res: StageLayout, r: float) -> None:
        """Record a candidate solve; one that stopped before its proof keeps its bound open."""
        self.solved += 1
        self.clock.add("cp-sat", res.cpsat_s)
        if res.status not in ("OPTIMAL", "INFEASIBLE"):
            self.unproven = min(self.unproven, max(cand.lb, res.bound_s * r if math.isfinite(res.bound_s) else 0.0))
        if res.layers:
            self.record(cand, res.layers, res.pools, res.objective_s * r)

    # ---- the open items ------------------------------------------------------------------------------------------
    def expand_keys(self) -> None:
        """Enumerate the candidates of the layer keys (lazily, best bound first) until the heap's top is below
        the next unexpanded key's bound, or that bound cannot beat the K-th best plan."""
        with self.clock("candidates"):
            self._expand_keys()

    def _expand_keys(self) -> None:
        while self.next_key < len(self.keys) and self.keys[self.next_key][0] < min(
            self.heap[0][0] if self.heap else math.inf, self.threshold()
        ):
            bound, _, key = self.keys[self.next_key]
            b = self.ts.key_batch(key)
            self.next_key += 1
            if b is not None and self.cost:
                b = b.priced(self.min_price, bound)  # the key's own price bound floors its candidates
            if b is not None and self.goodput:
                b = b.scaled(self.goodput_floor(b.gpus))
            if b is not None:
                self.batches.append(b)
                self.total += len(b.lbs)
                heapq.heappush(self.heap, (b.peek(), int(b.gpus[0]), KEY_BATCH, len(self.batches) - 1))

    def consider(self, cand: Candidate, hint: tuple[tuple[int, ...], tuple[str, ...]] | None = None) -> None:
        """Solve one candidate's layout, or with several pools queue its pool-block structures by bound."""
        thr = self.limit_for(cand)
        if cand.lb >= thr:
            return
        sm = StageModel(self.ts, cand, self.cancelled, self.margin)
        if sm.Q == 0:
            return
        remaining = self.time_limit_s - self.elapsed()
        if sm.Q == 1:
            r = self.rate(sm.gps, (sm.pools[0].name,) * cand.config.pp, cand.config)
            if math.isinf(r):  # goodput: failures leave this candidate no useful time
                return
            self.take(cand, sm.solve(max(0.05, remaining), None if math.isinf(thr) else thr / r, hint), r)
            return
        names = [p.name for p in sm.pools]
        warm: tuple[int, ...] | None = None
        if hint is not None and len(hint[1]) == cand.config.pp and set(hint[1]) <= set(names):
            # warm start: the previous plan's own structure first, hinted with its layout
            warm = tuple(names.index(n) for n in hint[1])
            r = self.rate(sm.gps, hint[1], cand.config)
            if math.isinf(r):
                return
            self.take(
                cand, sm.solve_structure(max(0.05, remaining), None if math.isinf(thr) else thr / r, warm, hint), r
            )
            thr = self.limit_for(cand)
        # Structures are bounded in seconds: a structure whose time bound reaches thr / (the least rate any
        # structure of this candidate can have) cannot beat the K-th best at any rate.
        least = min(self.rate(sm.gps, (n,) * cand.config.pp) for n in names)
        limit = None if math.isinf(thr) or least <= 0 else thr / least
        for lb, fixed in sm.structures(limit):
            if fixed == warm:
                continue
            r = self.rate(sm.gps, tuple(names[q] for q in fixed), cand.config)
            if math.isinf(r):
                continue
            bound = max(lb * r, cand.lb)
            if bound < thr:  # queued on its cheap bound; the table bound is computed when it is popped
                self.pending.append((sm, fixed, r))
                heapq.heappush(self.heap, (bound, cand.gpus, STRUCTURE_UNTIGHTENED, len(self.pending) - 1))

    def tighten_structure(self, index: int, bound: float, gpus: int) -> None:
        """A structure popped on its cheap bound: its layout bound from the stage tables (costly, so computed
        only for the structures the search reaches) drops it, queues it again, or it is solved now."""
        sm, fixed, r = self.pending[index]
        thr = self.limit_for(sm.cand)
        if bound >= thr:
            return
        tight = max(bound, sm.branch_bound(None if math.isinf(thr) else thr / r, fixed) * r)
        if tight >= thr:
            return
        if self.heap and tight > self.heap[0][0]:
            heapq.heappush(self.heap, (tight, gpus, STRUCTURE, index))
            return
        self.solve_structure(index)

    def solve_structure(self, index: int) -> None:
        sm, fixed, r = self.pending[index]
        thr = self.limit_for(sm.cand)
        remaining = self.time_limit_s - self.elapsed()
        self.take(sm.cand, sm.solve_structure(max(0.05, remaining), None if math.isinf(thr) else thr / r, fixed), r)

    # ---- the loop ------------------------------------------------------------------------------------------------
    def run(self, warm_start: ParallelConfig | None, probe: Probe | None) -> PlanResult:
        return self.result(self.search(warm_start), probe)

    def search(self, warm_start: ParallelConfig | None) -> float:
        """Branch and bound until the proof, the time limit or cancellation; the least open bound."""
        if warm_start is not None:  # warm start: solve the previous plan's knobs first, hinted with its layout
            ws = _warm_candidate(self.ts, warm_start)
            if ws is not None:
                hint = None
                if warm_start.layers_per_stage and warm_start.stage_pools:
                    hint = (tuple(warm_start.layers_per_stage), tuple(warm_start.stage_pools))
                self.consider(ws, hint)
        bound = math.inf
        while True:
            # The next key's bound is below every candidate of that key: expand keys until the heap's top is
            # below the next unexpanded key's bound (or no key is left).
            self.expand_keys()
            if not self.heap:
                bound = self.keys[self.next_key][0] if self.next_key < len(self.keys) else math.inf
                break
            lb, _g, kind, i = self.heap[0]
            bound = lb
            if lb >= self.threshold():
                break
            if self.cancelled is not None and self.cancelled():
                self.stopped = "cancelled"
                break
            if self.elapsed() > self.time_limit_s:
                self.stopped = "time limit"
                break
            heapq.heappop(self.heap)
            with self.clock("layouts"):
                if kind == STRUCTURE_UNTIGHTENED:
                    self.tighten_structure(i, lb, _g)
                elif kind == STRUCTURE:
                    self.solve_structure(i)
                else:
                    b = self.batches[i]
                    cand = self.ts.candidate(b, b.next)
                    b.next += 1
                    if b.next < len(b.lbs):
                        heapq.heappush(self.heap, (b.peek(), int(b.gpus[b.next]), KEY_BATCH, i))
                    self.consider(cand)
            if self.first_feasible and self.found:
                self.stopped = "first plan"
                break
            if self.progress is not None:
                best = min((v[0] for v in self.found.values()), default=None)
                self.progress(Progress(best, proven_bound(lb, best, self.unproven), self.elapsed(), self.solved))
        return min(bound, self.unproven)

    def result(self, bound: float, probe: Probe | None) -> PlanResult:
        ts, w = self.ts, self.ts.w
        objective = objective_name(w)
        ranked = sorted(self.found.values(), key=lambda v: (v[0], v[1]))
        elapsed = self.elapsed()
        counts = {"solve_time_s": elapsed, "candidates_total": self.total, "candidates_solved": self.solved}
        if not ranked:
            if self.stopped is not None or math.isfinite(self.unproven):
                return PlanResult(
                    status="UNKNOWN",
                    framework=w.framework,
                    objective=objective,
                    explanation=no_plan_within_limit(self.stopped, self.time_limit_s),
                    **counts,
                )
            report = diagnose_infeasible(ts, probe)
            return PlanResult(
                status="INFEASIBLE",
                framework=w.framework,
                objective=objective,
                explanation=Explanation(summary=f"No configuration fits: {report.detail}", infeasible=report),
                **counts,
            )
        lower = min(bound, ranked[0][0])
        status = "OPTIMAL" if self.stopped is None and lower >= ranked[0][0] else "FEASIBLE"
        if self.stopped == "first plan":  # a feasibility probe: no estimate, no explanation
            return PlanResult(
                status="FEASIBLE",
                framework=w.framework,
                objective=objective,
                objective_value=ranked[0][0],
                explanation=Explanation(summary="A plan exists (feasibility probe)."),
                **counts,
            )
        with self.clock("pricing"):
            found, placements, ideal = self.placed(ranked[: self.keep])
        if any(pe is not None and pe.repriced for pe in placements):
            # The search proved its optimum on the idealised fabric; the kept plans are priced as placed (never
            # below their idealised price), so what bounds a placed price is the least open bound, the idealised
            # price of the best plan not kept, and the kept plans' placed prices.
            beyond = ranked[self.keep][0] if len(ranked) > self.keep else math.inf
            lower = min(bound, beyond, min(obj for obj, _, _ in found))
            status = "OPTIMAL" if self.stopped is None and lower >= min(obj for obj, _, _ in found) else "FEASIBLE"
        t_decision = time.perf_counter()
        recipes, refused = self.recipes()
        found, placements, ideal = self.merged((found, placements, ideal), [(p.config, p.estimate) for p in recipes])
        decision = decide(contenders(ts.model, ts.cluster, w, found, self.measured), ts.cluster, self.interval_rule)
        if self.interval_rule and self.margin == 1.0 and (decision.skipped_oom or decision.all_oom):
            # The plans kept fit the GPU at the point estimate; the fastest is at out-of-memory risk, so search again
            # for layouts that fit with margin (one plan per signature was kept: its slower, roomier variants,
            # e.g. with recompute, were not).
            with self.clock("margin pass"):
                found, placements, ideal = self.merged((found, placements, ideal), self.margin_pass())
            decision = decide(contenders(ts.model, ts.cluster, w, found, self.measured), ts.cluster, True)
        best_obj, best_cfg, est = decision.pick.objective, decision.pick.config, decision.pick.estimate
        if best_obj < lower:  # a published recipe outside the declared space beats the search's optimum
            lower = best_obj
        if self.margin_stopped is not None:
            status = "FEASIBLE"
        pick = next(i for i, f in enumerate(found) if f[1] is best_cfg)
        alts = []
        for c in decision.ranked[1 : self.top_k]:
            iv = ratio_interval_pct(c.objective, best_obj, same_gpu(ts.cluster, c.config, best_cfg))
            alts.append(Alternative.versus(c.estimate, c.config, c.objective, best_cfg, best_obj, MAIN_KNOBS, iv))
        planned = PlannedConfig(config=best_cfg, estimate=est)
        pools = best_cfg.stage_pools or [ts.pools[0].name] * best_cfg.pp
        rate_s = ts.cluster.price_per_s(best_cfg.gpus_per_stage, pools)
        explanation = explain(ts, planned, alts, decision=decision)
        note = recipe_note(decision.pick, recipes, refused, found, w.objective, ranked[0][0])
        if note:
            explanation.summary = explanation.summary.rstrip(". ") + ". " + note
        self.clock.add("decision", time.perf_counter() - t_decision)
        placed = placements[pick]
        with self.clock("placement"):
            placement = placed.placement if placed is not None else place(ts.cluster, best_cfg).placement
        if placed is not None and placement.degraded:
            extra = f" (+{100 * (est.step_time_s / ideal[pick] - 1):.1f}% over the idealised fabric)"
            explanation.summary = explanation.summary.rstrip(". ") + (
                f". Placement degraded: {placement.degraded[0]}"
                + (f"; {len(placement.degraded) - 1} more shortfall(s)" if len(placement.degraded) > 1 else "")
                + f". The estimate prices the placement{extra if placed.repriced else ''}."
            )
        return PlanResult(
            status=status,
            framework=w.framework,
            objective=objective,
            objective_value=best_obj,
            lower_bound=lower,
            gap=relative_gap(best_obj, lower),
            plan=planned,
            alternatives=alts,
            explanation=explanation,
            price_per_step=None if rate_s is None else est.step_time_s * rate_s,
            goodput=est.goodput,
            placement=placement,
            phase_times_s=self.clock.phases(),
            **counts,
        )

    def recipes(self) -> tuple[list[PricedRecipe], list[Refused]]:
        """The published recipes of this model and cluster, priced (none for a feasibility probe or when the point
        estimate decides alone: that mode checks the search's own optimum against the oracle)."""
        if self.first_feasible or not self.interval_rule:
            return [], []
        ts = self.ts
        return price_recipes(ts.model, ts.cluster, ts.w, ts.space, ts.pools, ts.budget)

    def margin_pass(self) -> list[tuple[ParallelConfig, Estimate]]:
        """The best plans whose layouts fit the GPU's memory at the 80% upper memory bound (the remaining time, at
        least MARGIN_TIME_SHARE of the limit)."""
        budget = max(self.time_limit_s - self.elapsed(), MARGIN_TIME_SHARE * self.time_limit_s)
        m = TrainingSearch(
            self.ts, self.top_k, budget, None, self.cancelled, False, self.measured, True, memory_interval().high
        )
        m.search(None)
        self.total, self.solved, self.margin_stopped = self.total + m.total, self.solved + m.solved, m.stopped
        kept = sorted(m.found.values(), key=lambda v: (v[0], v[1]))[: self.keep]
        return [(cfg, estimate(self.ts.model, self.ts.cluster, self.ts.w, cfg)) for _, _, cfg in kept]

    def merged(self, have: Priced, extra: list[tuple[ParallelConfig, Estimate]]) -> Priced:
        """`have` (found, placements, idealised step times) with the `extra` plans not already in it, each at its
        objective (priced as placed where the inventory has unhealthy nodes)."""
        found, placements, ideal = have
        new = [(c, e) for c, e in extra if all(c != f[1] for f in found)]
        if not new:
            return have
        rows = [(e.step_time_s * self.rate(c.gpus_per_stage, tuple(c.stage_pools or ()), c), c.gpus, c) for c, e in new]
        if all(p.healthy_nodes == p.node_count for p in self.ts.cluster.pools):
            objs = [(o, c, e) for (o, _, c), (_, e) in zip(rows, new, strict=True)]
            more: Priced = (objs, [None] * len(new), [e.step_time_s for _, e in new])
        else:
            more = self.placed(rows)
        return found + more[0], placements + more[1], ideal + more[2]

    def placed(
        self, kept: list[tuple[float, int, ParallelConfig]]
    ) -> tuple[list[tuple[float, ParallelConfig, Estimate]], list[PlacedEstimate | None], list[float]]:
        """The kept plans priced on their placements (optimizer/placement): (objective, config, estimate) by
        placed objective, each one's placed estimate, and its idealised step time. A plan whose placement gives
        what the tiers assume keeps its search objective; a degraded one's objective scales with its placed step
        time. On an inventory whose every node is healthy no placement can fall short (placement/place.py), so the
        plans keep their estimates and only the pick is placed (None here)."""
        ts, w = self.ts, self.ts.w
        if all(p.healthy_nodes == p.node_count for p in ts.cluster.pools):
            ests = [estimate(ts.model, ts.cluster, w, cfg) for _, _, cfg in kept]
            found = [(obj, cfg, e) for (obj, _, cfg), e in zip(kept, ests, strict=True)]
            return found, [None] * len(kept), [e.step_time_s for e in ests]
        rows = []
        for obj, _, cfg in kept:
            pe = placed_estimate(ts.model, ts.cluster, w, cfg)
            ideal_step = estimate(ts.model, ts.cluster, w, cfg).step_time_s if pe.repriced else pe.estimate.step_time_s
            rows.append((obj * pe.estimate.step_time_s / ideal_step if pe.repriced else obj, cfg, pe, ideal_step))
        rows.sort(key=lambda r: r[0])
        return [(o, c, pe.estimate) for o, c, pe, _ in rows], [r[2] for r in rows], [r[3] for r in rows]


def _warm_candidate(ts: TrainingSpace, prev: ParallelConfig) -> Candidate | None:
    gbs = ts.w.global_batch_size
    if gbs % (prev.dp * prev.mbs) or prev.gpus > ts.budget:
        return None
    cfg = prev.model_copy(update={"layers_per_stage": None, "stage_pools": None})
    return Candidate(0.0, cfg.gpus, cfg, gbs // (prev.dp * prev.mbs))
