"""The stage layout's relaxation, apart from its CP-SAT model (optimizer/search/stage_model.py): each stage's
domain of table entries, a lower bound on the step from shortest paths over stages x layers, and the step of a
given layout by the model's own objective (the solver-agnostic check of a layout found without CP-SAT)."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from optimizer.search.solver_params import TIME_UNIT_S
from optimizer.spec.parallel_config import ParallelConfig


@dataclass(frozen=True, slots=True)
class Domain:
    """The table indices one stage may take, with what the layer-balance bound reads of them (cached per stage
    and pool-block branch: the structures of a candidate share most of their stages' domains)."""

    tab: dict[str, list[int]]
    allowed: list[int]
    times: list[int]  # the allowed entries' stage times, ascending
    most: list[int]  # most[k]: the most layers among the entries with the k+1 smallest times
    fewest: int  # the fewest layers of any entry
    t_fewest: int  # the least time of an entry with `fewest` layers
    slope: float  # every entry's time >= t_fewest + slope x (its layers - fewest)

    @classmethod
    def of(cls, tab: dict[str, list[int]], allowed: list[int], num_layers: int) -> Domain:
        by_time = sorted((tab["t"][j], j % (num_layers + 1)) for j in allowed)
        most = list(itertools.accumulate((x for _, x in by_time), max))
        fewest = min((x for _, x in by_time), default=0)
        t_fewest = min((t for t, x in by_time if x == fewest), default=0)
        slope = min(((t - t_fewest) / (x - fewest) for t, x in by_time if x > fewest), default=0.0)
        return cls(tab, allowed, [t for t, _ in by_time], most, fewest, t_fewest, slope)


def balance_bound(
    domains: list[Domain], c: ParallelConfig, m: int, L: int, t_star: int, upper_bound_s: float
) -> tuple[float, list[int] | None]:
    """A lower bound on the step time (seconds) tighter than _layout_bound, and the table entries (one per
    stage) of the relaxation's best layout (None without one). Most candidates the search hands to CP-SAT are
    solves that prove no layout beats the K-th best plan (152 of 183 on 405B / 131,072 H100), and many of the
    others' optima equal this bound (issue 49).

    _objective's step is the largest over stages i of term_i = pipeline - (backwards before stage i) + stage
    i's end work; with t_max = T every term is a weighted sum over the stages: (m - 1) T + sum t - sum_{k<i} b_k
    + e_i (1F1B, GPipe), the t and b weighted 1/v with m - 1/v on T (interleaved). For i = 0, 1 and pp - 1 (stage
    0 holds the embedding and fewer layers; stage 1 has the first full end work after the least backward; the
    last the head) and each T >= T* (the slowest stage's time), the least such sum with every stage at most T and
    the layers summing to L is a shortest path over stages x layers (numpy per stage); step >= the largest of
    those minima. The
    middle stages' order is relaxed, so it bounds the model's optimum from below. ZB-H1 keeps _layout_bound's
    (its fill reads u, not t)."""
    if c.schedule == "zb-h1":
        return 0.0, None
    share = 1.0 / c.vp if c.schedule == "interleaved-1f1b" else 1.0  # the stage times' weight in the pipeline
    slope = m - share  # t_max's
    limit = upper_bound_s / TIME_UNIT_S
    cols = []
    for d in domains:
        x = np.array([j % (L + 1) for j in d.allowed], dtype=np.int64)
        t = np.array([d.tab["t"][j] for j in d.allowed], dtype=np.float64)
        b = np.array([d.tab["b"][j] for j in d.allowed], dtype=np.float64)
        e = np.array([d.tab["e"][j] for j in d.allowed], dtype=np.float64)
        cols.append((x, t, b, e))
    times = sorted({float(v) for _, t, _, _ in cols for v in t if v >= t_star})

    def weights(i: int) -> list[np.ndarray]:
        """Each stage's weight in term i: before i its time less its backward, i its time and end work."""
        return [
            share * (t - b) if k < i else share * t + e if k == i else share * t for k, (_, t, b, e) in enumerate(cols)
        ]

    def least_sum(w: list[np.ndarray], T: float, trace: bool = False) -> tuple[float, list[int] | None]:
        """The least sum of the weights reaching L layers with every stage's time <= T, and (with trace) the
        table entry of each stage on that path."""
        choices: list[np.ndarray] = []
        best = np.full(L + 1, np.inf)
        best[0] = 0.0  # no stage yet: no layer placed
        for k, (x, t, _, _) in enumerate(cols):
            new = np.full(L + 1, np.inf)
            pick = np.full(L + 1, -1, dtype=np.int64)
            for q in np.flatnonzero(t <= T):
                n = int(x[q])
                cand = best[: L + 1 - n] + w[k][q]
                better = cand < new[n:]
                new[n:][better] = cand[better]
                pick[n:][better] = q
            best = new
            choices.append(pick)
        if not trace or not math.isfinite(best[L]):
            return float(best[L]), None
        path: list[int] = []
        left: int = L
        for k in range(len(cols) - 1, -1, -1):
            chosen = int(choices[k][left])
            path.append(domains[k].allowed[chosen])
            left -= int(cols[k][0][chosen])
        return float(best[L]), path[::-1]

    bound, layouts = 0.0, []
    for i in sorted({0, min(1, len(cols) - 1), len(cols) - 1}):
        w = weights(i)
        floor = least_sum(w, math.inf)[0]  # every T's sum is at least the unconstrained one
        result, at = math.inf, math.inf
        for T in times:
            if slope * T + floor >= min(result, limit * (1 + 1e-9)):
                break  # larger T cannot give less
            value = slope * T + least_sum(w, T)[0]
            if value < result:
                result, at = value, T
        if not math.isfinite(result):
            return math.inf, None
        bound = max(bound, result)
        layouts.append((result, least_sum(w, at, trace=True)[1]))
    best_layout = max(layouts, key=lambda r: r[0])[1]  # the binding term's layout
    return bound * TIME_UNIT_S, best_layout


def middle_sorted(entries: list[int], domains: list[Domain], L: int) -> list[int]:
    """The same layers with the middle stages' counts in non-decreasing order (the model's _middle_order; the
    sum and the middle stages' times are unchanged on one pool), where every stage's domain allows its new
    count; else the entries as they were."""
    mid = range(1, len(entries) - 1)
    counts = sorted(entries[i] % (L + 1) for i in mid)
    out = list(entries)
    for i, x in zip(mid, counts, strict=True):
        j = entries[i] - entries[i] % (L + 1) + x
        if j not in domains[i].allowed:
            return entries
        out[i] = j
    return out


def step_of(entries: list[int], domains: list[Domain], c: ParallelConfig, m: int, L: int, s: int) -> int | None:
    """The objective _objective gives a layout of these table entries (integer, x the schedule's scale), or
    None where the layout breaks a rule of the model the relaxation leaves out (the middle stages' order on
    one pool). The solver-agnostic check of a layout found without CP-SAT."""
    layers = [j % (L + 1) for j in entries]
    if any(layers[i] > layers[i + 1] for i in range(1, len(layers) - 2)):
        return None
    tab = [d.tab for d in domains]  # each stage's role tables
    t = [tab[i]["t"][j] for i, j in enumerate(entries)]
    t_max = max(t)
    pipe = s * m * t_max + sum(t) - t_max if c.schedule == "interleaved-1f1b" else sum(t) + (m - 1) * t_max
    step, prefix = 0, 0
    for i, j in enumerate(entries):
        step = max(step, pipe - prefix + s * tab[i]["e"][j])
        prefix += tab[i]["b"][j]
    return step
