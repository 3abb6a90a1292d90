"""CP-SAT model of one serving candidate's stage layout: how many layers each pipeline stage gets and which pool
it runs on, minimising time per output token.

Decode time and memory per stage are the cost model's own values (costmodel/inference.py), tabulated over
(pool, layers) per stage role (first, middle, last) and read with element constraints; TPOT is the estimator's:
the sum of the stage times plus the hops, or p x the slowest stage when at least p micro-batches keep every
stage busy [formulas G]. Constraint families, one function each: layer balance, pool capacity, middle-stage
order (symmetry breaking), objective. serving_oracle.py checks the optimum exhaustively.
"""

from __future__ import annotations

from dataclasses import dataclass

from optimizer.costmodel import network as net
from optimizer.costmodel.inference import StepWork, replica_limits, serving_memory, stage_time
from optimizer.search.cpsat import cp_model
from optimizer.search.pool_capacity import add_pool_capacity
from optimizer.search.solver_params import TIME_UNIT_S, stage_solver
from optimizer.spec.cluster_spec import ClusterSpec, NodePool
from optimizer.spec.model_spec import ModelSpec
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.stage_layers import LayerRules
from optimizer.spec.workload import InferenceWorkload

NS = 1.0 / TIME_UNIT_S


@dataclass(frozen=True)
class ServingLayout:
    """One serving candidate's solved layout (status as CP-SAT names it)."""

    status: str
    tpot_s: float = float("inf")
    bound_s: float = 0.0
    layers: tuple[int, ...] = ()
    pools: tuple[str, ...] = ()


@dataclass(frozen=True)
class _RoleTable:
    """Decode time (integer ns) by index q x (L + 1) + layers, and the indices whose memory fits."""

    time: list[int]
    allowed: list[int]


class _Vars:
    """Variables of the serving model; owns extraction."""

    def __init__(self) -> None:
        self.layers: list[cp_model.IntVar] = []
        self.pool: list[cp_model.IntVar] = []
        self.time: list[cp_model.IntVar] = []
        self.tpot: cp_model.IntVar | None = None

    def extract(self, solver: cp_model.CpSolver, names: list[str]) -> tuple[tuple[int, ...], tuple[str, ...]]:
        layers = tuple(int(solver.value(x)) for x in self.layers)
        return layers, tuple(names[int(solver.value(q))] for q in self.pool)


class ServingModel:
    """The layout model of one serving candidate (tp, pp, dp, ep fixed) on the pools that can host a stage."""

    def __init__(
        self, model: ModelSpec, cluster: ClusterSpec, w: InferenceWorkload, c: ParallelConfig, pools: list[NodePool]
    ) -> None:
        self.model, self.cluster, self.w, self.c = model, cluster, w, c
        self.pools = [q for q in pools if q.healthy_gpus >= c.gpus_per_stage]
        self.L, self.p = model.num_layers, c.pp
        # Micro-batches keep every stage busy when the batch splits into p of them [estimate_inference].
        self.mb = w.batch / self.p if w.batch >= self.p and self.p > 1 else float(w.batch)
        self.ctx_mean = w.prompt_len + w.output_len / 2
        # Declared space (as for training, stage_layers.LayerRules): the leading dense layers stay on stage 0 and
        # stages hold whole MoE periods, so each stage's dense/MoE mix depends only on its role and layer count.
        self.rules = LayerRules.of(model, self.p, 1, True)
        self.tables: dict[tuple[bool, bool], _RoleTable] = {}
        # The engine's step, as the estimate prices it: CUDA graphs within the capture limit (the decode work
        # below) and the host time of each iteration (added to TPOT). The smallest allowed GPU decides the limits
        # (the capture limit follows the GPU's memory for SGLang).
        self.limits = replica_limits(cluster, w, c, self.pools) if self.pools else None

    def _table(self, i: int) -> _RoleTable:
        """The decode-time table of stage i's role (first, last), filled once per role."""
        first, last = i == 0, i == self.p - 1
        hit = self.tables.get((first, last))
        if hit is not None:
            return hit
        model, L = self.model, self.L
        start = 0 if first else self.rules.first_k_dense
        time = [0] * (len(self.pools) * (L + 1))
        allowed = []
        for q, pool in enumerate(self.pools):
            for x in self.rules.counts(i):
                moe = model.moe_prefix[min(L, start + x)] - model.moe_prefix[start]
                *needs, capacity = serving_memory(model, self.cluster, self.w, self.c, pool, x, moe, first, last)
                assert self.limits is not None  # tables are built only when some pool hosts a stage
                work = StepWork.engine_decode(self.limits, self.mb, self.ctx_mean)
                t, _ = stage_time(model, self.cluster, self.w, self.c, pool, start, x, work, last)
                j = q * (L + 1) + x
                time[j] = round(t * NS)
                if sum(needs) <= capacity:
                    allowed.append(j)
        hit = self.tables[(first, last)] = _RoleTable(time, allowed)
        return hit

    def _hops(self) -> list[int]:
        """The pipeline hop of one micro-batch's activations, per pool of stage 0 (the estimator takes the hop
        from stage 0's pool), integer ns."""
        out = []
        for pool in self.pools:
            nb = net.neighbour_tier(net.cluster_tiers(self.cluster, pool), self.c.tp)
            out.append(round(net.p2p(nb.bw, nb.network, self.mb * self.model.hidden_size * 2) * NS))
        return out

    def build(self, upper_s: float | None) -> tuple[cp_model.CpModel, _Vars] | None:
        """The model, or None when some stage has no (pool, layers) that fits."""
        if not self.pools:
            return None
        L, Q = self.L, len(self.pools)
        model = cp_model.CpModel()
        v = _Vars()
        for i in range(self.p):
            tab = self._table(i)
            if not tab.allowed:
                return None
            idx = model.new_int_var_from_domain(cp_model.Domain.from_values(tab.allowed), f"idx{i}")
            lay = model.new_int_var(1, L, f"layers{i}")
            qv = model.new_int_var(0, Q - 1, f"pool{i}")
            model.add(idx == qv * (L + 1) + lay)
            d = model.new_int_var(0, max(tab.time), f"t{i}")
            model.add_element(idx, tab.time, d)
            v.layers.append(lay)
            v.pool.append(qv)
            v.time.append(d)
        self._layer_balance(model, v)
        add_pool_capacity(model, v.pool, [p.healthy_gpus for p in self.pools], self.c.gpus_per_stage)
        self._middle_order(model, v)
        self._objective(model, v, upper_s)
        return model, v

    # ---- constraint families ---------------------------------------------------------------------------------
    def _layer_balance(self, model: cp_model.CpModel, v: _Vars) -> None:
        """Integer layers per stage summing to the model (each stage's counts are its table's domain)."""
        model.add(sum(v.layers) == self.L)

    def _middle_order(self, model: cp_model.CpModel, v: _Vars) -> None:
        """Symmetry breaking (labelled): middle stages are interchangeable (same role, so the same tables; TPOT
        depends on the stage times only through their sum and maximum), so they are ordered by (pool, layers)."""
        L = self.L
        for i in range(1, self.p - 2):
            model.add(v.pool[i] * (L + 1) + v.layers[i] <= v.pool[i + 1] * (L + 1) + v.layers[i + 1])

    def _objective(self, model: cp_model.CpModel, v: _Vars, upper_s: float | None) -> None:
        """TPOT = sum of stage times + (p - 1) hops; with at least p micro-batches, also >= p x the slowest stage
        [estimate_inference]."""
        p = self.p
        host = round(self.limits.host_s * NS) if self.limits is not None else 0  # every iteration's host time
        hi = sum(max(t.time) for t in self.tables.values()) * (p + 1) + host + 10**12
        tpot = model.new_int_var(0, hi, "tpot")
        if p > 1:
            hops = self._hops()
            hop = model.new_int_var(min(hops), max(hops), "hop")
            model.add_element(v.pool[0], hops, hop)
            model.add(tpot >= sum(v.time) + (p - 1) * hop + host)
        else:
            model.add(tpot >= sum(v.time) + host)
        if p > 1 and self.w.batch >= p:
            dmax = model.new_int_var(0, max(max(t.time) for t in self.tables.values()), "dmax")
            for d in v.time:
                model.add(d <= dmax)
            model.add(tpot >= p * dmax + host)
        if upper_s is not None:
            model.add(tpot <= int(upper_s * NS))
        v.tpot = tpot
        model.minimize(tpot)

    def solve(self, time_limit_s: float, upper_s: float | None) -> ServingLayout:
        """The optimal layout. INFEASIBLE is proven (nothing fits under `upper_s`); UNKNOWN: stopped first."""
        built = self.build(upper_s)
        if built is None:
            return ServingLayout("INFEASIBLE")
        model, v = built
        solver = stage_solver(time_limit_s)
        status = solver.solve(model)
        name = solver.status_name(status)
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return ServingLayout("INFEASIBLE" if status == cp_model.INFEASIBLE else "UNKNOWN")
        layers, pools = v.extract(solver, [p.name for p in self.pools])
        return ServingLayout(
            name, solver.objective_value * TIME_UNIT_S, solver.best_objective_bound * TIME_UNIT_S, layers, pools
        )
