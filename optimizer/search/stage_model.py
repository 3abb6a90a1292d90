"""CP-SAT model of one training candidate's stage layout: how many layers each pipeline stage gets and which
pool it runs on.

Every per-stage quantity (time per micro-batch, backward time, work after the last backward, memory terms) is the
cost model's own value, tabulated over (pool, next stage's pool, layers) and read with element constraints, so the
objective is exactly `meshplan estimate` of the resulting configuration (times in integer nanoseconds) with no
big-M links. Constraint families, one function each: the table index of each stage (_link_index), layer balance
(_layer_balance), the memory limit (the stages' domains, _domains / _filter), pool capacity (_pool_capacity),
pool contiguity (_pool_contiguity), the middle stages' order (_middle_order) and the pipeline objective
(_objective). With several pools the planner branches on the pool-block structure (structures, solve_structure);
solve() is the one-model reference with the pools as variables.
"""

from __future__ import annotations

import bisect
import itertools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from optimizer.costmodel.memory import inflight_microbatches
from optimizer.costmodel.stage import CostContext, StageCost, stage_cost
from optimizer.search.candidates import Candidate, TrainingSpace, layer_work, pipeline_lower_bound
from optimizer.search.cpsat import cp_model
from optimizer.search.layout_relaxation import Domain, balance_bound, middle_sorted, step_of
from optimizer.search.pool_capacity import add_pool_capacity
from optimizer.search.solver_params import TIME_UNIT_S, stage_solver, stop_when
from optimizer.spec.stage_layers import LayerRules


@dataclass(frozen=True, slots=True)
class StageLayout:
    """The solved layout of one candidate."""

    status: str  # OPTIMAL, FEASIBLE, INFEASIBLE, UNKNOWN
    layers: tuple[int, ...]
    pools: tuple[str, ...]
    objective_s: float
    bound_s: float
    cpsat_s: float = 0.0
    """Seconds inside CP-SAT (the rest of the candidate's time built its tables and model)."""


_Table = tuple[dict[str, list[int]], list[int]]  # integer columns by name, and the indices filled in


class _Model(cp_model.CpModel):
    """A CpModel without the camelCase aliases OR-Tools attaches to every instance (about 1 ms per model;
    the search builds hundreds of small models)."""

    def _add_pre_pep8_methods(self) -> None:
        pass


class _Vars:
    """Variables of the stage model; owns extraction."""

    def __init__(self) -> None:
        self.layers: list[cp_model.IntVar] = []
        self.pool: list[cp_model.IntVar | int] = []
        self.index: list[cp_model.IntVar] = []
        self.t: list[cp_model.IntVar] = []
        self.b: list[cp_model.IntVar] = []
        self.e: list[cp_model.IntVar] = []
        self.u: list[cp_model.IntVar] = []
        self.step: cp_model.IntVar | None = None
        self.bounds: dict[str, tuple[int, int]] = {}  # name -> (min, max) over all stages
        self.linked: list[int] = []  # stages whose table index is a (pool, next pool, layers) variable
        self.block: dict[int, int] = {}  # the other stages: their one (pool, next pool) block of the tables
        self.member: list[list[cp_model.IntVar]] = []  # member[i][q]: stage i runs on pool q (open pools only)

    def extract(self, solver: cp_model.CpSolver, pool_names: list[str]) -> tuple[tuple[int, ...], tuple[str, ...]]:
        layers = tuple(int(solver.value(v)) for v in self.layers)
        pools = tuple(pool_names[int(solver.value(q)) if not isinstance(q, int) else q] for q in self.pool)
        return layers, pools


class StageModel:
    """Build and solve the layout model of one candidate."""

    def __init__(
        self, space: TrainingSpace, cand: Candidate, stop: Callable[[], bool] | None = None, margin: float = 1.0
    ) -> None:
        self.space, self.cand = space, cand
        self.stop = stop  # polled while CP-SAT runs: a cancelled job stops its solver
        # Memory must fit the GPU divided by `margin`: 1 for the point estimate; the 80% memory interval's upper
        # factor for a layout that fits with margin (training_search.TrainingSearch's margin pass).
        self.margin = margin
        c = cand.config
        self.ctx = CostContext(
            space.model, space.cluster, space.w, c, cand.microbatches, space.dense_memo, space.pool_facts
        )
        self.ctx.stage_cache = space.stage_cache(self.ctx.stage_signature())
        self.gps = c.gpus_per_stage
        self.pools = [p for p in space.pools if p.plannable_gpus >= self.gps]
        self.Q = len(self.pools)
        L, pp = space.model.num_layers, c.pp
        self.L = L
        self.rules = LayerRules.of(space.model, pp, c.vp, space.fw.virtual_stage_layout)
        self.k_dense = self.rules.first_k_dense
        self.l_first = self.rules.first_counts()
        self.scale = c.vp if c.schedule == "interleaved-1f1b" else 1
        self._roles: dict[tuple[bool, bool], dict[str, list[int]]] = {}  # tables per stage role
        self._blocks: dict[tuple[tuple[bool, bool], int, int], list[int]] = {}  # filled (role, pool, next pool)
        self._allowed: dict[tuple[int, int, int, float], Domain] = {}  # (stage, pool, next pool, t limit)
        self._inflight: dict[tuple[int, int], float] = {}
        self.closed: tuple[tuple[int, ...], int] | None = None  # a layout build() proved optimal without CP-SAT

    def inflight(self, stage: int, layers: int) -> float:
        """Micro-batches of activations stage `stage` holds at its peak with `layers` layers, in units of its
        full layer set (memory.inflight_microbatches; uneven virtual stages make it depend on the layers)."""
        hit = self._inflight.get((stage, layers))
        if hit is None:
            hit = self._inflight[(stage, layers)] = inflight_microbatches(
                self.cand.config, stage, self.cand.microbatches, layers
            )
        return hit

    # ---- tables ----------------------------------------------------------------------------------------------
    def _cost(self, i: int, q: int, qn: int | None, layers: int) -> StageCost:
        c = self.cand.config
        first, last = i == 0, i == c.pp - 1
        start = 0 if first else self.k_dense
        moe = self.ctx.moe_count(start, layers)
        nxt = self.pools[qn] if qn is not None else None
        return stage_cost(self.ctx, first, last, moe, layers, self.pools[q], nxt)

    def _idx(self, q: int, qn: int, layers: int) -> int:
        return (q * (self.Q + 1) + qn) * (self.L + 1) + layers

    def _role_table(self, role: tuple[bool, bool], upper_bound_s: float | None) -> _Table:
        """The cost-model values of a stage role (first, last) over (pool, next pool, layers), as integer tables,
        and the indices computed (see _block)."""
        Q = self.Q
        entries: list[int] = []
        for q in range(Q):
            for qn in [Q] if role[1] else range(Q):
                entries += self._block(role, q, qn, upper_bound_s)
        return self._tables(role), entries

    def _tables(self, role: tuple[bool, bool]) -> dict[str, list[int]]:
        tab = self._roles.get(role)
        if tab is None:
            size = self.Q * (self.Q + 1) * (self.L + 1)
            tab = self._roles[role] = {k: [0] * size for k in ("t", "b", "e", "u", "static", "act", "cap")}
        return tab

    def _block(self, role: tuple[bool, bool], q: int, qn: int, upper_bound_s: float | None) -> list[int]:
        """Fill the role's tables for one (pool, next pool) by increasing layers, stopping at the first layer
        count that can never be part of a plan (both cut-offs are monotone in the layers, so every larger count
        fails too); the indices filled. Built once per candidate and block, on first use.
        - Memory: states + reserve + the role's fewest in-flight micro-batches x activations exceed the GPU
          (each term grows with the layers; the transient terms are left out, so this is a lower bound).
        - Time, given an upper bound on the step: m x the stage's time per micro-batch exceeds it. Every
          schedule's step is at least m x the slowest stage's time (1F1B/GPipe: sum t + (m-1) t_max; interleaved:
          m t_max + (sum t - t_max)/v; ZB-H1: m t_max + sum u - max u with u = t - 2w >= forward >= 0, as the
          backward holds both the dgrad and wgrad GEMMs), and the stage's time grows with its layers.
        A later call with a lower bound reuses the block (bounds only fall during a search)."""
        hit = self._blocks.get((role, q, qn))
        if hit is not None:
            return hit
        c, m = self.cand.config, self.cand.microbatches
        first, _ = role
        positions = [i for i in range(c.pp) if (i == 0, i == c.pp - 1) == role]
        # Memory grows with the layers, so the first count that fails ends the block, except on stage 0 with
        # uneven virtual stages: its embedding output is held per micro-batch in flight, and the in-flight share
        # of an uneven chunk split can fall as a layer is added (memory.inflight_microbatches), so it skips.
        monotone = not first or c.vp == 1 or not self.rules.flexible
        ns = 1.0 / TIME_UNIT_S
        limit = math.inf if upper_bound_s is None else upper_bound_s * (1 + 1e-9)
        tab = self._tables(role)
        entries: list[int] = []
        for x in self.rules.counts(positions[0]):
            sc = self._cost(positions[0], q, None if qn == self.Q else qn, x)
            states = sc.weights + sc.grads + sc.optim + sc.emb + sc.reserve
            inflight_min = self.inflight(positions[-1], x)  # later stages hold fewer micro-batches in flight
            capacity = sc.capacity / self.margin
            if states > capacity or m * sc.time > limit:
                break
            if states + inflight_min * sc.act_per_mb > capacity:
                if monotone:
                    break
                continue
            j = self._idx(q, qn, x)
            tab["t"][j] = round(sc.time * ns)
            tab["b"][j] = round(sc.bwd * ns)
            tab["e"][j] = round(sc.end * ns)
            tab["u"][j] = round((sc.time - 2 * sc.wgrad) * ns)
            tab["static"][j] = round(sc.static)
            tab["act"][j] = round(sc.act_per_mb)
            tab["cap"][j] = int(capacity)
            entries.append(j)
        self._blocks[(role, q, qn)] = entries
        return entries

    def _domains(self, upper_bound_s: float | None, fixed_pools: tuple[int, ...] | None) -> list[Domain] | None:
        """Per stage, the table indices it may take, or None when some stage has none."""
        c, m = self.cand.config, self.cand.microbatches
        pp, Q = c.pp, self.Q
        if Q == 0:
            return None
        t_limit = math.inf if upper_bound_s is None else upper_bound_s / TIME_UNIT_S / m + 1
        domains: list[Domain] = []
        for i in range(pp):
            role = (i == 0, i == pp - 1)
            tab = self._tables(role)
            if fixed_pools is None:
                dom = Domain.of(tab, self._filter(i, tab, self._role_table(role, upper_bound_s)[1], t_limit), self.L)
            else:  # a branch of the pool-block decomposition: (pool, next pool) known
                q, qn = fixed_pools[i], fixed_pools[i + 1] if i + 1 < pp else Q
                hit = self._allowed.get((i, q, qn, t_limit))
                if hit is None:
                    allowed = self._filter(i, tab, self._block(role, q, qn, upper_bound_s), t_limit)
                    hit = self._allowed[(i, q, qn, t_limit)] = Domain.of(tab, allowed, self.L)
                dom = hit
            if not dom.allowed:
                return None
            domains.append(dom)
        return domains

    def _filter(self, i: int, tab: dict[str, list[int]], entries: list[int], t_limit: float) -> list[int]:
        """Memory limit [cost model A]: stage i's (pool, next pool, layers) index may only take values whose
        static memory + in-flight micro-batches x activations fits the pool's GPU (exact, per stage); and, under
        an upper bound on the step, whose m x stage time stays below it (see _block)."""
        L = self.L
        return [
            j
            for j in entries
            if tab["static"][j] + self.inflight(i, j % (L + 1)) * tab["act"][j] <= tab["cap"][j]
            and tab["t"][j] <= t_limit
        ]

    def branch_bound(self, upper_bound_s: float | None, fixed_pools: tuple[int, ...] | None) -> float:
        """A lower bound on the step time of every layout of this candidate (within a pool-block branch when
        `fixed_pools` is given); inf when none exists."""
        domains = self._domains(upper_bound_s, fixed_pools)
        return math.inf if domains is None else self._layout_bound(domains)[0]

    def _layout_bound(self, domains: list[Domain]) -> tuple[float, int]:
        """A lower bound on the step time of any layout within `domains`, seconds (inf: no layout).

        Layer balance: the slowest stage takes at least T*, the least T for which the stages' largest layer
        counts with time <= T sum to the model's layers (a relaxation of the integer split; exact in T). Then the
        schedule's pipeline formula with T* for the maximum and, for the sum, the larger of the stages' least
        times and their times at their fewest layers plus the layers left over at the least per-layer slope of
        any stage (Domain.slope), plus stage 0's least end work (stage 0 has no cool-down slack), as in
        _objective. Returns (bound s, T* ns)."""
        L, m, c = self.L, self.cand.microbatches, self.cand.config
        spare = L - sum(d.fewest for d in domains)  # layers beyond every stage's fewest
        if spare < 0 or sum(d.most[-1] for d in domains) < L:
            return math.inf, 0

        def layers_within(limit: int) -> int:
            total = 0
            for d in domains:
                k = bisect.bisect_right(d.times, limit)
                if k == 0:
                    return -1
                total += d.most[k - 1]
            return total

        # T* is one of the stages' times, at least the largest of their least times (below it a stage is empty)
        floor = max(d.times[0] for d in domains)
        candidates = sorted({t for d in domains for t in d.times if t >= floor})
        lo, hi = 0, len(candidates) - 1
        while lo < hi:
            mid = (lo + hi) // 2
            if layers_within(candidates[mid]) >= L:
                hi = mid
            else:
                lo = mid + 1
        t_max = candidates[lo]
        # The stages' times sum to at least their least times, and to at least each stage's time at its fewest
        # layers plus the spare layers at the least per-layer slope of any stage (sum of (x_i - fewest_i) = spare).
        t_sum = max(
            sum(d.times[0] for d in domains),
            sum(d.t_fewest for d in domains) + spare * min(d.slope for d in domains),
        )
        pipe = pipeline_lower_bound(c.schedule, m, c.vp, t_max, t_sum)
        d0 = domains[0]
        return (pipe + min(d0.tab["e"][j] for j in d0.allowed)) * TIME_UNIT_S, t_max

    def build(
        self,
        upper_bound_s: float | None = None,
        hint: tuple[tuple[int, ...], tuple[str, ...]] | None = None,
        fixed_pools: tuple[int, ...] | None = None,
    ) -> tuple[cp_model.CpModel, _Vars] | None:
        """The model, or None when some stage has no feasible (pool, layers) at all."""
        c, m = self.cand.config, self.cand.microbatches
        Q, L = self.Q, self.L
        domains = self._domains(upper_bound_s, fixed_pools)
        if domains is None:
            return None
        bound_s, t_star = self._layout_bound(domains)
        if upper_bound_s is not None and bound_s > upper_bound_s * (1 + 1e-9):
            return None
        upper = math.inf if upper_bound_s is None else upper_bound_s
        floor_s, entries = balance_bound(domains, c, m, L, t_star, upper)
        if upper_bound_s is not None and floor_s > upper_bound_s * (1 + 1e-9):
            return None  # no layout beats the bound: proven without CP-SAT
        self.closed = None
        if entries is not None and Q == 1:
            entries = middle_sorted(entries, domains, L)
            step = step_of(entries, domains, c, m, L, self.scale)
            if step is not None and step / self.scale <= floor_s / TIME_UNIT_S * (1 + 1e-12) + 1:
                # The layout reaches the lower bound: optimal, and _solve_one needs no CP-SAT solve.
                self.closed = (tuple(j % (L + 1) for j in entries), step)
            if hint is None:  # CP-SAT starts from it (a layout the relaxation found, its order repaired by it)
                hint = (tuple(j % (L + 1) for j in entries), (self.pools[0].name,) * c.pp)
        model = _Model()
        v = _Vars()
        for i, dom in enumerate(domains):
            tab, allowed = dom.tab, dom.allowed
            lvals = sorted({j % (L + 1) for j in allowed})
            lay = model.new_int_var_from_domain(cp_model.Domain.from_values(lvals), f"layers{i}")
            block = allowed[0] // (L + 1)
            if all(j // (L + 1) == block for j in allowed):
                # One (pool, next pool) for this stage: index the tables by its layers (a slice of L+1 entries).
                idx, lo_j = lay, block * (L + 1)
                v.block[i] = block
            else:
                idx = model.new_int_var_from_domain(cp_model.Domain.from_values(allowed), f"idx{i}")
                lo_j = 0
                v.linked.append(i)
            qv: cp_model.IntVar | int = 0
            if fixed_pools is not None:  # a branch of the pool-block decomposition (see solve): constants
                qv = fixed_pools[i]
            elif Q > 1:
                qv = model.new_int_var(0, Q - 1, f"pool{i}")
            v.layers.append(lay)
            v.pool.append(qv)
            v.index.append(idx)
            columns = (("t", v.t), ("b", v.b), ("e", v.e)) + ((("u", v.u),) if c.schedule == "zb-h1" else ())
            for name, store in columns:
                hi = max(tab[name][j] for j in allowed)
                lo = min(0, min(tab[name][j] for j in allowed))
                var = model.new_int_var(lo, hi, f"{name}{i}")
                model.add_element(idx, tab[name][lo_j : lo_j + L + 1] if idx is lay else tab[name], var)
                store.append(var)
                old = v.bounds.get(name, (lo, hi))
                v.bounds[name] = (min(old[0], lo), max(old[1], hi))
        self._link_index(model, v)
        self._layer_balance(model, v)
        self._pool_capacity(model, v)
        self._pool_contiguity(model, v)
        self._middle_order(model, v)
        self._objective(model, v, m, upper_bound_s, t_star, floor_s)
        if hint is not None:
            names = [p.name for p in self.pools]
            for var, val in zip(v.layers, hint[0], strict=True):
                model.add_hint(var, val)
            for qv, name in zip(v.pool, hint[1], strict=True):
                if not isinstance(qv, int) and name in names:
                    model.add_hint(qv, names.index(name))
        return model, v

    # ---- constraint families ---------------------------------------------------------------------------------
    def _link_index(self, model: cp_model.CpModel, v: _Vars) -> None:
        """Table index = (pool, next stage's pool, layers) of each stage (where the stage's pool is open); a stage
        whose allowed entries lie in one (pool, next pool) block is indexed by its layers alone, so its pool and
        the next stage's pool are that block's."""
        pp, Q = len(v.layers), self.Q
        for i in v.linked:
            qn: cp_model.IntVar | int = v.pool[i + 1] if i + 1 < pp else Q
            model.add(v.index[i] == (v.pool[i] * (Q + 1) + qn) * (self.L + 1) + v.layers[i])
        for i, block in v.block.items():
            q, qn = divmod(block, Q + 1)
            if not isinstance(v.pool[i], int):
                model.add(v.pool[i] == q)
            if i + 1 < pp and not isinstance(v.pool[i + 1], int):
                model.add(v.pool[i + 1] == qn)

    def _layer_balance(self, model: cp_model.CpModel, v: _Vars) -> None:
        """Stage balancing: integer layers per stage summing to the model (the counts each stage may take,
        stage_layers.LayerRules, are the variables' domains)."""
        model.add(sum(v.layers) == self.L)

    def _pool_capacity(self, model: cp_model.CpModel, v: _Vars) -> None:
        """Interconnect tiers / inventory: each stage takes tp x cp x dp healthy GPUs of its pool. (Fixed pools
        come from structures, which only lists block assignments within the pools' GPUs.)"""
        if all(isinstance(q, int) for q in v.pool):
            return
        v.member = add_pool_capacity(model, v.pool, [p.plannable_gpus for p in self.pools], self.gps)

    def _pool_contiguity(self, model: cp_model.CpModel, v: _Vars) -> None:
        """Symmetry breaking (labelled): the stages on one pool form one contiguous block, so a pipeline crosses
        between pools at most once per pool; this also keeps slow cross-pool hops to the minimum. (Fixed pools
        are contiguous blocks by construction.)"""
        if all(isinstance(q, int) for q in v.pool):
            return
        for q in range(self.Q):
            leaves = []
            for i in range(len(v.pool) - 1):
                leave = model.new_bool_var(f"leave{i}_{q}")
                model.add(leave >= v.member[i][q] - v.member[i + 1][q])
                leaves.append(leave)
            model.add(sum(leaves) <= 1)

    def _middle_order(self, model: cp_model.CpModel, v: _Vars) -> None:
        """Dominance restriction (labelled; part of the declared search space): consecutive middle stages on the
        same pool have non-decreasing layer counts. Earlier stages keep more micro-batches in flight (1F1B:
        p - i), so moving layers later never raises peak memory; it removes the permutations of equal-time
        stages that otherwise dominate the proof."""
        pp = len(v.layers)
        for i in range(1, pp - 2):
            qa, qb = v.pool[i], v.pool[i + 1]
            if isinstance(qa, int) and isinstance(qb, int):
                if qa == qb:
                    model.add(v.layers[i] <= v.layers[i + 1])
            else:
                same = model.new_bool_var(f"same{i}")
                model.add(v.pool[i] == v.pool[i + 1]).only_enforce_if(same)
                model.add(v.pool[i] != v.pool[i + 1]).only_enforce_if(same.negated())
                model.add(v.layers[i] <= v.layers[i + 1]).only_enforce_if(same)

    def _objective(
        self,
        model: cp_model.CpModel,
        v: _Vars,
        m: int,
        upper_bound_s: float | None,
        t_star: int = 0,
        floor_s: float = 0.0,
    ) -> None:
        """Step time of the cost model [training.step_time], times the schedule's scale (v for interleaved):
        pipeline = sum t + (m-1) max t (1F1B, GPipe); v m max t + sum t - max t (interleaved, x v);
        m max t + sum u - max u (ZB-H1). Step = max over stages of pipeline - earlier backwards + own end work.
        Redundant (labelled): t_max >= T*, the layer-balance bound of _layout_bound; step >= balance_bound
        (layout_relaxation.py; often the optimum itself: CP-SAT then stops at the first layout that reaches it)."""
        c = self.cand.config
        t_hi = v.bounds["t"][1]
        t_max = model.new_int_var(min(t_star, t_hi), t_hi, "t_max")
        for t in v.t:  # the objective grows with t_max, so t_max >= every t_i makes it the maximum
            model.add(t <= t_max)
        model.add(len(v.t) * t_max >= sum(v.t))  # redundant: the maximum is at least the mean
        s = self.scale
        if c.schedule == "interleaved-1f1b":
            pipe = s * m * t_max + sum(v.t) - t_max
        elif c.schedule == "zb-h1":
            u_max = model.new_int_var(v.bounds["u"][0], v.bounds["u"][1], "u_max")
            model.add_max_equality(u_max, v.u)
            pipe = m * t_max + sum(v.u) - u_max
        else:
            pipe = sum(v.t) + (m - 1) * t_max
        hi = s * (m + len(v.t)) * (t_hi + 1) + s * len(v.e) * (v.bounds["e"][1] + 1)
        step = model.new_int_var(0, hi, "step")
        prefix: list[cp_model.IntVar] = []
        for i in range(len(v.t)):
            model.add(step >= pipe - sum(prefix) + s * v.e[i])
            prefix.append(v.b[i])
        if upper_bound_s is not None:
            model.add(step <= int(upper_bound_s / TIME_UNIT_S * s))
        if 0 < floor_s < math.inf:  # rounded down with a nanosecond per table term to spare (TIME_UNIT_S)
            model.add(step >= max(0, math.floor(floor_s / TIME_UNIT_S * s) - s * (len(v.t) + 2)))
        v.step = step
        model.minimize(step)

    def solve(
        self,
        time_limit_s: float,
        upper_bound_s: float | None = None,
        hint: tuple[tuple[int, ...], tuple[str, ...]] | None = None,
    ) -> StageLayout:
        """Optimal layout of the whole model in one CP-SAT solve, the pool of every stage a variable when there are
        several pools (the reference the tests check bounds against). The planner does not call it on several
        pools: it branches on the pool-block `structures` itself (one heap for all candidates' structures) and
        solves each branch with `solve_structure`."""
        return self._solve_one(time_limit_s, upper_bound_s, hint, None)

    def solve_structure(
        self,
        time_limit_s: float,
        upper_bound_s: float | None,
        fixed: tuple[int, ...],
        hint: tuple[tuple[int, ...], tuple[str, ...]] | None = None,
    ) -> StageLayout:
        """Optimal layout with the pool of every stage fixed (one branch of `structures`)."""
        return self._solve_one(time_limit_s, upper_bound_s, hint, fixed)

    def structures(self, upper_bound_s: float | None = None) -> list[tuple[float, tuple[int, ...]]]:
        """Every contiguous pool-block assignment that fits the pools' GPUs, with a lower bound on its step time
        (best first; those whose bound reaches `upper_bound_s` left out): the slowest stage takes at least the
        least T at which stages holding whole layers within T hold all L (a = per-layer time on the stage's
        pool; see slowest), and the stages together at least L x the fastest a [same terms as the candidate
        bound]. Enumerated as stage counts per pool first (the
        bound depends on the order only through stage 0's pool), then the orders of the pools used."""
        c, m, L, Q = self.cand.config, self.cand.microbatches, self.L, self.Q
        pp, vp = c.pp, c.vp
        n_moe = self.ctx.moe_count(0, L)
        per_layer = [layer_work(self.ctx, pool, L - n_moe, n_moe) / L for pool in self.pools]
        cap = [p.plannable_gpus // self.gps for p in self.pools]
        # Step >= pipeline + stage 0's work after its last backward (no slack on stage 0); that work grows with
        # the stage's parameters, so its least value is at the fewest layers stage 0 may hold.
        l0 = self.l_first[0] if self.l_first else 1
        e0 = [self._cost(0, q, None if pp == 1 else q, l0).end for q in range(Q)]
        limit = math.inf if upper_bound_s is None else upper_bound_s
        out: list[tuple[float, tuple[int, ...]]] = []

        x_min = min(self.rules.least(r) for r in range(pp))

        def slowest(counts: tuple[int, ...], used: list[int]) -> float:
            """A lower bound on the slowest stage's time: the least T at which the stages, each holding a whole
            number of layers of time <= T (floor(T / a) on a pool of per-layer time a), hold all L layers, and
            at least x_min x a on every pool used (every rank holds at least x_min layers). T starts at the
            continuous balance L / sum(n / a) and steps to the next pool's next whole layer; each step adds a
            layer, and flooring loses fewer than pp, so at most pp steps."""
            t = max(L / sum(counts[q] / per_layer[q] for q in used), x_min * max(per_layer[q] for q in used))
            while True:
                whole = [math.floor(t / per_layer[q] * (1 + 1e-12)) for q in used]
                if sum(counts[q] * k for q, k in zip(used, whole, strict=True)) >= L:
                    return t
                t = min((k + 1) * per_layer[q] for q, k in zip(used, whole, strict=True))

        def place(counts: tuple[int, ...]) -> None:
            used = [q for q in range(Q) if counts[q]]
            t_max = slowest(counts, used)
            lb = pipeline_lower_bound(c.schedule, m, vp, t_max, L * min(per_layer[q] for q in used))
            if lb + min(e0[q] for q in used) >= limit:
                return
            for order in itertools.permutations(used):
                bound = lb + e0[order[0]]
                if bound < limit:
                    out.append((bound, tuple(q for q in order for _ in range(counts[q]))))

        def counts_from(q: int, left: int, counts: tuple[int, ...]) -> None:
            if q == Q - 1:  # the last pool takes what is left (enumerating it would cost a factor pp)
                if left <= cap[q]:
                    place((*counts, left))
                return
            for n in range(0, min(left, cap[q]) + 1):
                counts_from(q + 1, left - n, (*counts, n))

        counts_from(0, pp, ())
        out.sort()
        return out

    def _solve_one(
        self,
        time_limit_s: float,
        upper_bound_s: float | None,
        hint: tuple[tuple[int, ...], tuple[str, ...]] | None,
        fixed_pools: tuple[int, ...] | None,
    ) -> StageLayout:
        built = self.build(upper_bound_s, hint, fixed_pools)
        if built is None:
            return StageLayout("INFEASIBLE", (), (), math.inf, math.inf)
        model, v = built
        if self.closed is not None and (
            upper_bound_s is None or self.closed[1] <= upper_bound_s / TIME_UNIT_S * self.scale
        ):
            layers, step = self.closed
            value = step * TIME_UNIT_S / self.scale
            return StageLayout("OPTIMAL", layers, (self.pools[0].name,) * len(layers), value, value)
        solver = stage_solver(time_limit_s)
        t0 = time.perf_counter()
        with stop_when(solver, self.stop):
            status = solver.solve(model)
        took = time.perf_counter() - t0
        name = solver.status_name(status)
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return StageLayout(name, (), (), math.inf, math.inf, took)
        layers, pools = v.extract(solver, [p.name for p in self.pools])
        unit = TIME_UNIT_S / self.scale
        return StageLayout(name, layers, pools, solver.objective_value * unit, solver.best_objective_bound * unit, took)
