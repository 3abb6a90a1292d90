"""Enumerate the global knobs of training plans and bound their step time from below.

A candidate fixes every knob except the stage layout (layers and pool per stage), which the CP-SAT stage model
chooses. Its lower bound is the cost model's pipeline formula for a perfectly balanced, fractional split on the
fastest allowed pool (max stage time >= mean stage time): every term is a cost-model term, so the bound is valid
and within a few percent of the exact optimum. A memory bound (mean per-GPU memory over the stages must fit the
largest usable memory) drops candidates that cannot fit anywhere.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from optimizer.costmodel import network as net
from optimizer.costmodel.constants import BF16_BYTES, FP8_BYTES, OVERLAP_COMPUTE_SLOWDOWN
from optimizer.costmodel.framework_runtime import runtime
from optimizer.costmodel.memory import activation_bytes_per_layer, state_bytes_per_param, training_reserve_bytes
from optimizer.costmodel.stage import CostContext, LayerCost, PoolFacts, StageCost, stage_cost
from optimizer.costmodel.terms.data_parallel import secondary_weight_bytes, shard_levels
from optimizer.frameworks.capabilities import (
    Framework,
    expert_tp_values,
    framework,
    runs_expert_tp,
    runs_shard_group,
    runs_tp_comm_overlap,
)
from optimizer.search.space import (
    DEFAULT_MBS,
    DEFAULT_VP,
    MAX_PP,
    MIN_TOKENS_PER_CP_RANK,
    SearchSpace,
)
from optimizer.spec.cluster_spec import ClusterSpec, NodePool
from optimizer.spec.model_spec import ModelSpec
from optimizer.spec.names import priced_framework
from optimizer.spec.parallel_config import RECOMPUTES, SHARD_SCOPES, CpComm, EpDispatch, ParallelConfig, ShardScope
from optimizer.spec.recompute_modules import searched_modules
from optimizer.spec.stage_layers import LayerRules
from optimizer.spec.workload import TrainingWorkload

SCHED_CODES = ("1f1b", "interleaved-1f1b", "zb-h1", "gpipe")


@dataclass(frozen=True, slots=True)
class LayerKey:
    """The knobs that decide one layer's cost on a GPU."""

    tp: int
    cp: int
    ep: int
    mbs: int
    sp: bool
    tpo: bool
    recompute: str
    etp: int
    """Expert tensor-parallel degree (tp, or 1 where the framework splits experts over EP only)."""
    epo: bool = False
    """EP all-to-all overlapped with another micro-batch's compute."""
    rc_modules: tuple[str, ...] | None = None
    """With selective recompute: Megatron's recompute modules (None = its default, the attention core)."""
    cpc: CpComm = "p2p"
    """How context-parallel attention communicates (ParallelConfig.cp_comm)."""
    off: int = 0
    """Layers whose activations are offloaded to host memory (ParallelConfig.offload_layers)."""
    epd: EpDispatch = "alltoall"
    """How MoE tokens reach their experts (ParallelConfig.ep_dispatch)."""


def layer_work(ctx: CostContext, pool: NodePool, n_dense: int, n_moe: int) -> float:
    """Per micro-batch time of all the model's layers on one GPU of `pool` (compute, recompute, exposed TP/CP/EP
    communication): the work every stage layout divides among its stages."""
    gpu = ctx.gpu(pool)
    total = 0.0
    for count, is_moe in ((n_dense, False), (n_moe, True)):
        if count:
            lc = ctx.layer(pool, gpu, is_moe)
            total += count * (lc.fwd + lc.bwd + lc.recompute + lc.tp + lc.cp + lc.ep + lc.launch)
    return total


Num = TypeVar("Num", float, np.ndarray)


def pipeline_lower_bound(schedule: str, m: Num, vp: int, t_max: Num, t_sum: Num) -> Num:
    """The schedule's pipeline time [training.pipeline_time] with t_max a lower bound on the slowest stage's time
    and t_sum one on the sum of the stage times: 1F1B/GPipe sum t + (m-1) t_max; interleaved
    (m - 1/v) t_max + sum t / v; ZB-H1 m t_max (its fill, a sum of u = t - 2w >= 0 less the largest, is >= 0)."""
    pipe: Num  # (numpy arithmetic is untyped)
    if schedule == "interleaved-1f1b":
        pipe = (m - 1.0 / vp) * t_max + t_sum / vp
    elif schedule == "zb-h1":
        pipe = m * t_max
    else:
        pipe = t_sum + (m - 1) * t_max
    return pipe


def _divisors(n: int) -> list[int]:
    """The divisors of n, ascending."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return small + [n // d for d in reversed(small) if d * d != n]


def _staggered_memory_bound(
    layers: int, states: np.ndarray, act: float, pv: np.ndarray, m_arr: np.ndarray
) -> np.ndarray:
    """A lower bound on the largest per-GPU memory over the stages of a 1F1B / ZB-H1 pipeline (less the reserve),
    for each (pp in pv, dp): stage i holds n_i = min(p - i, m) micro-batches in flight [formulas A], so `layers`
    layers of this type, x_i on stage i, need max_i x_i (s + n_i a) >= layers / sum_i 1/(s + n_i a) (the
    minimax of a split with positive weights equalizes them). s: states per layer per dp, a: activations per
    layer and micro-batch. Embedding, logits and transients only add to it."""
    p_top = int(pv.max())
    c = states / act  # (D,)
    n = np.arange(1, p_top + 1, dtype=float)[:, None]
    cum = np.cumsum(1.0 / (c[None, :] + n), axis=0)  # cum[k-1, d] = sum_{n=1..k} 1/(c_d + n)
    m = m_arr[None, :]
    p = pv[:, None]
    k = np.minimum(p, m)
    harmonic = np.take_along_axis(cum, np.broadcast_to(k - 1, (len(pv), len(m_arr))), axis=0)
    harmonic = harmonic + np.maximum(0, p - m) / (c[None, :] + m)
    bound: np.ndarray = layers * act / harmonic
    return bound


@dataclass(frozen=True, slots=True)
class ShardVariant:
    """One way of sharding the ZeRO states for each dp value of a key (ParallelConfig.shard_group, shard_scope)."""

    shard: np.ndarray
    """Per dp value: the shard group (dp replicas), 0 for the whole data-parallel group, -1 where not available."""
    scope: ShardScope
    mask: np.ndarray | None
    """Per dp value, whether the variant is available; None when it is at every one."""

    @classmethod
    def of(cls, shard: np.ndarray, scope: ShardScope) -> ShardVariant:
        available: np.ndarray = shard >= 0
        return cls(shard, scope, None if available.all() else available)


@dataclass(frozen=True, slots=True)
class Candidate:
    """Global knobs of a plan, with a lower bound on its step time (seconds)."""

    lb: float
    gpus: int
    config: ParallelConfig
    microbatches: int


@dataclass(slots=True)
class KeyBatch:
    """All candidates of one layer key, sorted by lower bound; `next` points at the first unexplored one."""

    key: LayerKey
    lbs: np.ndarray
    gpus: np.ndarray
    rows: np.ndarray  # columns: pp, vp, dp, schedule code (SCHED_CODES), zero, shard group (0: dp), scope code
    next: int = 0

    def priced(self, price_per_gpu_s: float, floor: float = 0.0) -> KeyBatch:
        """The batch with its step-time bounds turned into price bounds (x GPUs x the least price per GPU-second,
        and at least `floor`, a price bound valid for every candidate of the key), re-sorted."""
        lbs = np.maximum(self.lbs * self.gpus * price_per_gpu_s, floor)
        order = np.lexsort((self.gpus, lbs))
        return KeyBatch(self.key, lbs[order], self.gpus[order], self.rows[order])

    def scaled(self, factors: np.ndarray) -> KeyBatch:
        """The batch with each candidate's bound multiplied by its factor (>= 1: a least objective rate per second
        of step time, e.g. 1 / the largest goodput fraction its GPU count allows), re-sorted."""
        lbs = self.lbs * factors
        order = np.lexsort((self.gpus, lbs))
        return KeyBatch(self.key, lbs[order], self.gpus[order], self.rows[order])

    def peek(self) -> float:
        return float(self.lbs[self.next]) if self.next < len(self.lbs) else float("inf")


@dataclass(frozen=True, slots=True)
class KeyTerms:
    """What every candidate of one layer key shares, per dp value (arrays indexed like `dp_arr`)."""

    dp_arr: np.ndarray
    m_arr: np.ndarray  # micro-batches per step
    gps: np.ndarray  # GPUs per stage, tp x cp x dp
    hop_arr: np.ndarray  # the fastest pipeline hop of one activation, seconds
    layers_work: float  # all layers' work per micro-batch on the fastest pool, seconds
    last_stage_extra: float  # the logits and loss on the last stage, per micro-batch, seconds
    per_type: list[tuple[int, float]]  # (layers of a type, least per-layer time)
    activations: float  # all layers' activation bytes per micro-batch
    logits_bytes: float
    states: dict[int, np.ndarray]  # per ZeRO stage: all parameters' state bytes per GPU before the pp split
    layer_types: list[tuple[int, float, dict[int, np.ndarray]]]  # (layers, activations, states) per layer type
    slot_bound: np.ndarray  # [k - 1, dp]: least max stage work with k stages
    pps: list[int]
    # Least data-parallel tail of the first stage (its gradient reduction and parameter gather), ZeRO 0-2:
    # [0] with the whole model on one stage, [1] with pp >= 2 (the first stage holds at least the embedding).
    tail: tuple[np.ndarray, np.ndarray]
    variants: list[ShardVariant]  # [0]: the states over the whole data-parallel group
    # For variant i >= 1, computed when first asked: its `states`, the `layer_types` states, and its `tail`
    shard_states: Callable[[int], tuple[dict[int, np.ndarray], list[dict[int, np.ndarray]]]]
    shard_tail: Callable[[int], tuple[np.ndarray, np.ndarray]]


class _Columns:
    """The candidates a key batch collects, column by column."""

    def __init__(self) -> None:
        self.cols: dict[str, list[np.ndarray]] = {
            k: [] for k in ("pp", "vp", "dp", "sched", "zero", "shard", "scope", "lb", "gpus")
        }

    def add(
        self,
        ok: np.ndarray,
        pv: np.ndarray,
        vp: int,
        dp_arr: np.ndarray,
        sched: str,
        zero: int,
        lb: np.ndarray,
        gpus: np.ndarray,
        variant: ShardVariant,
    ) -> None:
        ii, jj = np.nonzero(ok)
        if not len(ii):
            return
        self.cols["pp"].append(pv[ii])
        self.cols["vp"].append(np.full(len(ii), vp))
        self.cols["dp"].append(dp_arr[jj])
        self.cols["sched"].append(np.full(len(ii), SCHED_CODES.index(sched)))
        self.cols["zero"].append(np.full(len(ii), zero))
        self.cols["shard"].append(variant.shard[jj])
        self.cols["scope"].append(np.full(len(ii), SHARD_SCOPES.index(variant.scope)))
        self.cols["lb"].append(lb[ii, jj])
        self.cols["gpus"].append(gpus[ii, jj])

    def batch(self, key: LayerKey) -> KeyBatch | None:
        """The collected candidates sorted by lower bound, then GPUs; None when there are none."""
        if not self.cols["lb"]:
            return None
        arr = {k: np.concatenate(v) for k, v in self.cols.items()}
        order = np.lexsort((arr["gpus"], arr["lb"]))
        rows = np.stack([arr[k][order] for k in ("pp", "vp", "dp", "sched", "zero", "shard", "scope")], axis=1)
        return KeyBatch(key, arr["lb"][order], arr["gpus"][order], rows)


def _least_inflight(sched: str, P: np.ndarray, M: np.ndarray, vp: int, layers: int, flexible: bool) -> np.ndarray:
    """The fewest micro-batches of activations any stage holds at its peak, on average over its layers
    (memory.inflight_microbatches): interleaved ((vp - 1) p + 1 chunks, at most m vp, over vp; with uneven
    chunks a rank's chunks all hold >= floor(n / v) of its n layers), GPipe m, 1F1B / ZB-H1 at least one."""
    if sched == "interleaved-1f1b":
        least: np.ndarray = np.minimum((vp - 1) * P + 1, M * vp) / vp
        if flexible:
            least = least * np.maximum(0.0, 1.0 - P * (vp - 1) / layers)
        return least
    least = M + 0 * P if sched == "gpipe" else np.minimum(1.0, M) + 0 * P
    return least


class TrainingSpace:
    """The declared training search space of one (model, cluster, workload, space), and its bounds."""

    def __init__(self, model: ModelSpec, cluster: ClusterSpec, w: TrainingWorkload, space: SearchSpace) -> None:
        self.model, self.cluster, self.w, self.space = model, cluster, w, space
        # The framework decides which knobs exist (frameworks/capabilities.py); `auto` is resolved by the planner.
        self.fw: Framework = framework(priced_framework(w.framework))
        self.rt = runtime(self.fw.name)
        names = space.pools or tuple(p.name for p in cluster.pools)
        self.pools: list[NodePool] = [cluster.pool(n) for n in names if cluster.pool(n).plannable_gpus > 0]
        # The framework's TP-comm overlap runs on every allowed pool's GPU (Megatron's needs Transformer Engine).
        self.tp_overlap_runs = all(runs_tp_comm_overlap(self.fw, cluster.gpu_of(p)) for p in self.pools)
        # The smallest NVLink (or PCIe) domain among the allowed pools: an EP group larger than it crosses the network.
        self.smallest_domain = min((cluster.fabric_of(p).domain_size or 1 for p in self.pools), default=1)
        # The smallest node or NVLink domain among them: a shard group of at most this many GPUs stays inside one.
        self.smallest_scale_up = min(
            (max(p.gpus_per_node, cluster.fabric_of(p).domain_size or 1) for p in self.pools), default=1
        )
        self.budget = sum(p.plannable_gpus for p in self.pools)
        if space.max_gpus is not None:
            self.budget = min(self.budget, space.max_gpus)
        self.largest_pool = max((p.plannable_gpus for p in self.pools), default=0)
        self.usable = {
            p.name: cluster.gpu_of(p).memory_bytes
            - training_reserve_bytes(cluster.gpu_of(p).memory_bytes, cluster.calibration_of(p).memory_reserve)
            for p in self.pools
        }
        self.n_moe = model.num_moe_layers
        self.n_dense = model.num_layers - self.n_moe
        self._probes: dict[LayerKey, tuple[CostContext, dict[str, float]]] = {}
        self._sync_memo: dict[tuple[tuple[net.Level, ...], float, float], float] = {}  # _tail_bound collectives
        self._shard_tail_memo: dict[tuple[int, int, int, int, int, int, float, float], float] = {}
        self._shard_states_memo: dict[tuple[object, ...], dict[int, np.ndarray]] = {}
        self._searched: dict[tuple[int, str, bool], bool] = {}  # _searches_shard
        self._searched_stages: dict[tuple[str, bool], bool] = {}  # _shard_stages
        self.dense_memo: dict[tuple[object, ...], LayerCost] = {}
        self.pool_facts = PoolFacts()  # the cluster's per-pool GPU, tiers and reserve, shared by every context
        self._stage_caches: dict[tuple[object, ...], dict[tuple[bool, bool, int, int, str, str | None], StageCost]] = {}
        self._hops: dict[tuple[int, float], float] = {}
        self._states: dict[tuple[str, int, int, int, int, int], dict[int, np.ndarray]] = {}
        self._pps: dict[int, list[int]] = {}
        self._admitted: dict[tuple[int, int], bool] = {}

    # ---- domains ---------------------------------------------------------------------------------------------
    def tp_values(self) -> list[int]:
        m, sp = self.model, self.space
        top = 2 * max((max(p.gpus_per_node, self.cluster.fabric_of(p).domain_size or 1) for p in self.pools), default=1)
        out = []
        for t in range(1, top + 1):
            if m.num_attention_heads % t or (m.mla is None and m.kv_heads % t):
                continue  # rule: tp divides the attention heads and the KV heads
            if sp.allows("tp", t):
                out.append(t)
        return out

    def cp_values(self) -> list[int]:
        """Context-parallel degrees: a pinned degree whenever the framework runs it (Megatron needs the sequence
        to split into 2 x cp load-balanced chunks: seq_len % (2 cp) == 0, megatron/core/utils.py
        get_batch_on_this_cp_rank); unpinned, every such degree that leaves at least MIN_TOKENS_PER_CP_RANK tokens
        per rank and fits a pool (all divisors of the sequence, not only powers of two: long-context runs use 32
        and more)."""
        s = self.w.seq_len
        pinned = self.space.pinned_values("cp")
        if pinned is not None:
            values = sorted({int(c) for c in pinned})
            least = 1
        else:
            values = [c for c in range(1, max(1, self.largest_pool) + 1) if s % c == 0] or [1]
            least = MIN_TOKENS_PER_CP_RANK
        return [
            c
            for c in values
            if (c == 1 or (s % (2 * c) == 0 and s // c >= least and self.fw.context_parallel))
            and self.space.allows("cp", c)
        ]

    def ep_values(self) -> list[int]:
        if self.model.moe is None:
            return [1] if self.space.allows("ep", 1) else []
        e = self.model.moe.num_experts
        return [
            x
            for x in range(1, e + 1)
            if e % x == 0 and self.space.allows("ep", x) and (x == 1 or self.fw.expert_parallel)
        ]

    def etp_values(self, tp: int, ep: int) -> list[int]:
        """Expert tensor-parallel degrees of MoE models (dense models keep etp = tp): a pin, any the framework
        runs; unpinned, what the framework runs with tp and ep (frameworks.expert_tp_values). See
        _expert_grid_ok for the expert grids searched with each."""
        if self.model.moe is None:
            return [tp]
        pinned = self.space.pinned_values("etp")
        if pinned is not None:
            return [int(e) for e in pinned if runs_expert_tp(self.fw, tp, ep, int(e))]
        return [e for e in expert_tp_values(self.fw, tp, ep) if self.space.allows("etp", e)]

    def _expert_grid_ok(self, key: LayerKey, d: int) -> bool:
        """Whether dp = d forms the expert grid etp x ep x expert-dp over tp x d x cp. Declared-space restriction
        (labelled): with coarse experts (expert FFN at least the model width, Mixtral) and etp below tp, only the
        grids that etp = tp cannot form are searched, unless etp is pinned or the framework runs nothing else;
        Megatron recommends etp = 1 for fine-grained experts and etp = tp otherwise ('--expert-tensor-parallel-
        size: same as TP, recommended 1 for fine-grained MoE models', megatron/core/transformer/moe/README.md).
        Searching every grid with both for Mixtral 8x7B on 64 H100 doubled the solve (benchmarks/solver.py 5a:
        2.2 -> 4.4 s) for the same plan."""
        if (key.tp * d * key.cp) % (key.ep * key.etp):
            return False
        moe = self.model.moe
        if moe is None or key.etp == key.tp or moe.expert_ffn_hidden_size < self.model.hidden_size:
            return True
        if self.space.pinned_values("etp") is not None or self.fw.expert_tensor_parallel != "any":
            return True
        return (d * key.cp) % key.ep != 0

    def mbs_values(self) -> list[int]:
        pinned = self.space.pinned_values("mbs")
        base = pinned if pinned is not None else DEFAULT_MBS
        return [b for b in base if self.w.global_batch_size % b == 0 and self.space.allows("mbs", b)]

    def layer_keys(self) -> list[LayerKey]:
        keys = []
        for tp in self.tp_values():
            for cp, cpc in [(c, k) for c in self.cp_values() for k in self._cp_comm_values(c, tp)]:
                for ep in self.ep_values():
                    for mbs in self.mbs_values():
                        for sp_ in (False, True) if tp > 1 and self.fw.sequence_parallel else (False,):
                            if not self.space.allows("sp", sp_):
                                continue
                            for tpo in self._tpo_values(sp_):
                                for rc, mods in self._recompute_values():
                                    for etp in self.etp_values(tp, ep):
                                        for epo in self._epo_values(ep, rc):
                                            for off in self._offload_values(rc):
                                                for epd in self._epd_values(ep, etp):
                                                    keys.append(
                                                        LayerKey(
                                                            tp, cp, ep, mbs, sp_, tpo, rc, etp, epo, mods, cpc, off, epd
                                                        )
                                                    )
        return keys

    def _cp_comm_values(self, cp: int, tp: int) -> tuple[CpComm, ...]:
        """How CP may communicate at (cp, tp): the ring alone without CP; with CP, the kinds the framework runs
        and the pin allows, a2a where cp divides a TP rank's query and KV heads (ModelSpec.cp_splits_heads).
        Declared-space restrictions (labelled), lifted by a cp_comm pin:
        - allgather only when pinned: Megatron's default is the ring, and the all-gather kind serves masks the ring
          cannot split (document masks, Llama 3 §3.3.2); priced exposed, it never beats the ring by more than the
          overlap slowdown of the ring's hidden part.
        - a2a only where it moves fewer bytes than the ring: per layer forward it sends (2q + 2kv)(cp - 1)/cp of a
          rank's token widths against the ring's 2kv(cp - 1), so where q/kv < cp - 1 (multi-head attention at
          cp >= 3; never under 8:1 grouped-query attention, whose KV heads cap cp at 8). Elsewhere the ring moves
          less and hides it under the attention steps. Searching a2a everywhere it is valid made the solver 20-35%
          slower (benchmarks/solver.py 3, 5a, 7) for the same plans."""
        if cp == 1:
            return ("p2p",)
        q, kv = self.model.heads_per_tp_rank(tp)
        pinned = self.space.pinned_values("cp_comm")
        return tuple(
            v
            for v in self.fw.cp_comms
            if self.space.allows("cp_comm", v)
            and (v != "a2a" or (self.model.cp_splits_heads(tp, cp) and (pinned is not None or q < (cp - 1) * kv)))
            and (v != "allgather" or (pinned is not None and v in pinned))
        )

    def _tpo_values(self, sp_: bool) -> tuple[bool, ...]:
        """Dominance (labelled): with SP, overlapping TP communication never costs time or memory in the model
        (exposed = max(comm / tp, comm - gemm) <= comm), so the non-overlapped variant is searched only when
        pinned."""
        if not sp_ or not self.tp_overlap_runs:
            return (False,) if self.space.allows("tp_comm_overlap", False) else ()
        pinned = self.space.pinned_values("tp_comm_overlap")
        return tuple(pinned) if pinned is not None else (True,)

    def _offload_values(self, rc: str) -> tuple[int, ...]:
        """Declared-space restriction (labelled): activation offloading is searched only when pinned (each value
        is one more set of keys, and it runs only at pp = 1 without recompute), where the framework runs it and
        below the model's layer count."""
        pinned = self.space.pinned_values("offload_layers")
        if pinned is None:
            return (0,)
        ok = rc == "none" and self.fw.activation_offload
        return tuple(int(k) for k in pinned if not k or (ok and int(k) < self.model.num_layers))

    def _epo_values(self, ep: int, rc: str) -> tuple[bool, ...]:
        """Declared-space restriction (labelled): EP all-to-all overlap is searched only when pinned (it trades
        one more micro-batch of activations for hidden EP traffic; searching it would double the MoE keys), and
        only where the framework runs it (ep > 1, no full recompute)."""
        pinned = self.space.pinned_values("ep_comm_overlap")
        if pinned is None:
            return (False,)
        ok = ep > 1 and rc != "full" and self.fw.ep_comm_overlap
        return tuple(v for v in pinned if not v or ok)

    def _epd_values(self, ep: int, etp: int) -> tuple[EpDispatch, ...]:
        """How MoE tokens may reach their experts. Dominance (labelled): hierarchical dispatch (DeepEP / HybridEP)
        never sends more over the network than the all-to-all and the same inside a node, at no memory cost in the
        model, so where the framework runs it and the EP group (ep x etp consecutive ranks) leaves the NVLink domain
        it is searched alone; inside one domain the two cost the same and the framework's default all-to-all is
        kept. A pin searches what it names."""
        pinned = self.space.pinned_values("ep_dispatch")
        if pinned is not None:
            return tuple(v for v in pinned if v == "alltoall" or (ep > 1 and v in self.fw.ep_dispatches))
        if ep > 1 and "deepep" in self.fw.ep_dispatches and ep * etp > self.smallest_domain:
            return ("deepep",)
        return ("alltoall",)

    def _recompute_values(self) -> tuple[tuple[str, tuple[str, ...] | None], ...]:
        """(recompute, modules) pairs to search.

        Symmetry (labelled): with flash attention, selective recompute of the attention core (Megatron's default
        module) costs exactly what no recompute costs, in time and memory; it is searched only when pinned.
        Declared-space restriction (labelled): beside that, one set of Megatron recompute modules is searched for
        MoE and MLA models (recompute_modules.searched_modules); a recompute_modules pin replaces it."""
        values: list[tuple[str, tuple[str, ...] | None]] = [
            (rc, None) for rc in RECOMPUTES if self.space.allows("recompute", rc) and rc in self.fw.recomputes
        ]
        if self.w.flash_attention and self.space.pinned_values("recompute") is None:
            values = [v for v in values if v[0] != "selective"]
        if not self.fw.recompute_modules or not self.space.allows("recompute", "selective"):
            return tuple(values)
        pinned = self.space.pinned_values("recompute_modules")
        if pinned is not None:
            return tuple(("selective", tuple(mods)) for mods in pinned)
        searched = searched_modules(self.model)
        if searched is not None:
            values.append(("selective", searched))
        return tuple(values)

    # ---- bounds ----------------------------------------------------------------------------------------------
    def stage_cache(
        self, signature: tuple[object, ...]
    ) -> dict[tuple[bool, bool, int, int, str, str | None], StageCost]:
        """The stage costs shared by the candidates of one stage signature (CostContext.stage_signature):
        candidates that differ only in pp or schedule price the same stages."""
        hit = self._stage_caches.get(signature)
        if hit is None:
            hit = self._stage_caches[signature] = {}
        return hit

    def _probe(self, key: LayerKey) -> tuple[CostContext, dict[str, float]]:
        """A cost-model context for `key` (dp, pp do not change a layer's cost) and the per-micro-batch work of
        all layers on each pool; computed once per key and shared by key_bound and key_batch."""
        hit = self._probes.get(key)
        if hit is None:
            probe = ParallelConfig(
                tp=key.tp,
                cp=key.cp,
                cp_comm=key.cpc,
                ep=key.ep,
                etp=key.etp,
                dp=key.ep,
                mbs=key.mbs,
                sequence_parallel=key.sp,
                tp_comm_overlap=key.tpo,
                ep_comm_overlap=key.epo,
                ep_dispatch=key.epd,
                recompute=key.recompute,
                recompute_modules=key.rc_modules,
                offload_layers=key.off,
            )
            ctx = CostContext(self.model, self.cluster, self.w, probe, 1, self.dense_memo, self.pool_facts)
            hit = (ctx, {p.name: layer_work(ctx, p, self.n_dense, self.n_moe) for p in self.pools})
            self._probes[key] = hit
        return hit

    def key_bound(self, key: LayerKey) -> float:
        """A lower bound on every candidate of `key`: the layers' work of the whole batch spread perfectly over
        the GPU budget (step >= m x max stage time >= (gbs/mbs) x sum of stage times / (dp x pp))."""
        _, work = self._probe(key)
        best = min(work.values())
        replicas = max(1, self.budget // (key.tp * key.cp))
        return self.w.global_batch_size / key.mbs * best / replicas

    def key_cost_bound(self, key: LayerKey, price_per_gpu_s: dict[str, float]) -> float:
        """A lower bound on the price per step of every candidate of `key`. Each stage s (on pool q_s, l_s layers
        of per-layer work a_q) runs m micro-batches, so step >= m l_s a_q for every s, and the price per step
        gps x step x sum_s price_q >= gps x m x sum_s price_q l_s a_q >= gps x m x L x min_q(price_q a_q), with
        gps x m = tp x cp x gbs / mbs: the work priced on the pool where it is cheapest (not the fastest work at
        the least price, which pairs the fastest GPU with the cheapest one)."""
        _, work = self._probe(key)
        cheapest = min(work[name] * price for name, price in price_per_gpu_s.items() if name in work)
        return self.w.global_batch_size / key.mbs * cheapest * key.tp * key.cp

    def key_batch(self, key: LayerKey, prune_memory: bool = True) -> KeyBatch | None:
        """Every candidate of `key`, with lower bounds, sorted; None when none is left. `prune_memory=False`
        keeps the candidates the memory bound proves infeasible (the oracle checks them the long way)."""
        with np.errstate(invalid="ignore"):  # inf x 0 where a pipeline has no room: masked out
            return self._key_batch(key, prune_memory)

    def _key_batch(self, key: LayerKey, prune_memory: bool) -> KeyBatch | None:
        t = self._key_terms(key)
        if t is None:
            return None
        cols = _Columns()
        M = t.m_arr[None, :].astype(float)
        for vp in self._vp_values():
            for multi, pv, scheds, zeros in self._pipelines(key, vp, t.pps):
                P = pv[:, None].astype(float)
                gpus = t.gps[None, :] * pv[:, None]
                fits_budget = (gpus <= self.budget) & np.isfinite(t.slot_bound[pv - 1, :])
                t_max, t_sum = self._stage_time_bounds(t, pv, vp, multi)
                for sched in scheds:
                    ok_s = fits_budget
                    if sched == "interleaved-1f1b":  # Megatron: m a multiple of pp
                        ok_s = fits_budget & ((t.m_arr[None, :] % pv[:, None]) == 0)
                    lb = pipeline_lower_bound(sched, M, vp, t_max, t_sum)
                    tail = t.tail[1 if multi else 0][None, :]
                    inflight = _least_inflight(sched, P, M, vp, self.model.num_layers, self.fw.virtual_stage_layout)
                    whole = t.variants[0]
                    for zero in zeros:
                        if not self.space.allows("zero", zero):
                            continue
                        ok = ok_s & self._may_fit(t, zero, sched, multi, pv, inflight) if prune_memory else ok_s
                        if whole.mask is not None:  # a shard_group pin excludes the whole group at some dp
                            ok = ok & whole.mask[None, :]
                        cols.add(ok, pv, vp, t.dp_arr, sched, zero, lb + tail if zero < 3 else lb, gpus, whole)
                        for vi in self._shard_indices(t, key, zero, multi):
                            variant = t.variants[vi]
                            ok = ok_s & variant.mask[None, :] if variant.mask is not None else ok_s
                            if prune_memory:
                                ok = ok & self._may_fit(t, zero, sched, multi, pv, inflight, *t.shard_states(vi))
                            lb_v = lb + t.shard_tail(vi)[1 if multi else 0][None, :] if zero < 3 else lb
                            cols.add(ok, pv, vp, t.dp_arr, sched, zero, lb_v, gpus, variant)
        return cols.batch(key)

    def _shard_indices(self, t: KeyTerms, key: LayerKey, zero: int, multi: bool) -> list[int]:
        """The shard variants of `t` (beyond the whole group) searched at ZeRO stage `zero` (_searches_shard)."""
        if len(t.variants) == 1:
            return []
        mp = multi or key.tp > 1 or key.ep > 1
        return [vi for vi in range(1, len(t.variants)) if self._searches_shard(zero, t.variants[vi].scope, mp)]

    def _key_terms(self, key: LayerKey) -> KeyTerms | None:
        """The terms every candidate of `key` shares (None when no dp value is left)."""
        model, w, space = self.model, self.w, self.space
        gbs = w.global_batch_size
        ctx, work = self._probe(key)
        dps = [
            d
            for d in _divisors(gbs // key.mbs)
            if self._expert_grid_ok(key, d) and space.allows("dp", d) and key.tp * key.cp * d <= self.largest_pool
        ]
        if not dps:
            return None
        fp8 = w.precision == "fp8"
        act_dense = activation_bytes_per_layer(
            model, ctx.c, w.seq_len, False, w.flash_attention, fp8, ctx.rt.selective_recompute
        )
        act_moe = (
            activation_bytes_per_layer(
                model, ctx.c, w.seq_len, True, w.flash_attention, fp8, ctx.rt.selective_recompute
            )
            if self.n_moe
            else 0.0
        )
        # Offloaded layers' activations live in host memory: per layer on average (costmodel/training.py)
        kept = 1 - key.off / model.num_layers
        act_dense, act_moe = act_dense * kept, act_moe * kept
        # Parameters one model-parallel rank group holds in all (split by TP; experts by TP x EP).
        shared_moe = model.moe_layer_params - model.moe_expert_params_per_layer
        dense_params = (self.n_dense * model.dense_layer_params + self.n_moe * shared_moe) / key.tp
        expert_params = self.n_moe * model.moe_expert_params_per_layer / (key.etp * key.ep)
        emb_params = (model.embedding_params + model.lm_head_params) / key.tp
        dp_arr = np.array(dps, dtype=np.int64)
        gps = key.tp * key.cp * dp_arr
        p_max = min(model.num_layers, MAX_PP, self.budget // (key.tp * key.cp))
        msg = key.mbs * w.seq_len / key.cp * model.hidden_size * 2 / key.tp  # one bf16 activation hop
        types = [  # (kind, layers, activations, dense and expert params of one layer per GPU)
            (kind, n, act, dense / key.tp, expert / (key.etp * key.ep))
            for kind, n, act, dense, expert in (
                ("dense", self.n_dense, act_dense, model.dense_layer_params, 0.0),
                ("moe", self.n_moe, act_moe, shared_moe, model.moe_expert_params_per_layer),
            )
            if n
        ]
        variants = self._shard_variants(key, dps)

        @functools.cache
        def shard_states(vi: int) -> tuple[dict[int, np.ndarray], list[dict[int, np.ndarray]]]:
            v = variants[vi]
            return self._shard_states(key, "all", dense_params + emb_params, expert_params, dps, v), [
                self._shard_states(key, kind, dense, expert, dps, v) for kind, _, _, dense, expert in types
            ]

        @functools.cache
        def shard_tail(vi: int) -> tuple[np.ndarray, np.ndarray]:
            shard = variants[vi].shard
            return (
                self._shard_tail_bound(key, dps, dense_params + emb_params, expert_params, shard),
                self._shard_tail_bound(key, dps, model.embedding_params / key.tp, 0.0, shard),
            )

        return KeyTerms(
            dp_arr=dp_arr,
            m_arr=gbs // (dp_arr * key.mbs),
            gps=gps,
            hop_arr=np.array([self._hop(int(g), msg) for g in gps]),
            layers_work=min(work.values()),
            last_stage_extra=min(stage_cost(ctx, False, True, 0, 0, p, None).time for p in self.pools),
            # Integer layers: some stage holds at least ceil(n / pp) of the model's n layers of a type (dense,
            # MoE), each costing at least that type's per-layer time on the fastest pool [as layer_work].
            per_type=[
                (n, min(layer_work(ctx, p, int(not moe), int(moe)) for p in self.pools))
                for n, moe in ((self.n_dense, False), (self.n_moe, True))
                if n
            ],
            activations=self.n_dense * act_dense + self.n_moe * act_moe,
            logits_bytes=key.mbs * w.seq_len / key.cp * model.vocab_size / key.tp * ctx.logit_bytes,
            states=self._state_memory(key, "all", dense_params + emb_params, expert_params, dps),
            # One layer's states per GPU of its stage, by layer type (dense; MoE: shared part + experts).
            layer_types=[
                (n, act, self._state_memory(key, kind, dense, expert, dps)) for kind, n, act, dense, expert in types
            ],
            slot_bound=self._slot_bound(work, gps, p_max),
            pps=self._pp_values(p_max),
            tail=(
                self._tail_bound(key, dps, dense_params + emb_params, expert_params),
                self._tail_bound(key, dps, model.embedding_params / key.tp, 0.0),
            ),
            variants=variants,
            shard_states=shard_states,
            shard_tail=shard_tail,
        )

    def _searches_shard(self, zero: int, scope: str, model_parallel: bool) -> bool:
        """Whether a shard group of `scope` is searched at ZeRO stage `zero`: where the framework runs it
        (capabilities.runs_shard_group) and, unpinned, where it changes what crosses the network. Dominance
        (labelled): under hierarchical collectives [formulas C7] a reduce-scatter and gather inside the group with
        the replicas' all-reduce of the shards move the same bytes per level as the reduce-scatter and gather over
        the whole group [formulas C9], so where the gradients are reduced once per step (ZeRO-1), or the replicas
        all-reduce after every micro-batch (ZeRO-2 in FSDP2), the smaller group saves only ring latency
        (microseconds per collective) and costs 1/group - 1/dp more sharded states; it is searched there only
        when a shard_group or shard_scope pin asks. ZeRO-3 (gathers every micro-batch) and ZeRO-2 whose replicas
        reduce once per step (Megatron-FSDP) keep it. Searching it at ZeRO-1 too made Mixtral 8x7B on 64 H100
        (benchmarks/solver.py 5a) solve 50% slower for the same plan."""
        hit = self._searched.get((zero, scope, model_parallel))
        if hit is None:
            pinned = "shard_group" in self.space.pins or "shard_scope" in self.space.pins
            hit = runs_shard_group(self.fw, zero, scope, model_parallel) and (
                pinned or zero == 3 or (zero == 2 and not self.rt.replica_reduce_every_microbatch)
            )
            self._searched[(zero, scope, model_parallel)] = hit
        return hit

    def _shard_stages(self, key: LayerKey, scope: str) -> bool:
        """Whether some ZeRO stage the space allows searches a shard group of `scope` for `key`, on one pipeline
        stage or several (_searches_shard)."""
        mp = key.tp > 1 or key.ep > 1
        hit = self._searched_stages.get((scope, mp))
        if hit is None:
            hit = self._searched_stages[(scope, mp)] = any(
                self.space.allows("zero", zero) and self._searches_shard(zero, scope, mp or multi)
                for multi, zeros in ((False, self.fw.zero_stages), (True, self.fw.zero_stages_with_pp))
                for zero in zeros
            )
        return hit

    def _shard_variants(self, key: LayerKey, dps: list[int]) -> list[ShardVariant]:
        """The shard groups searched for each dp value: first the whole data-parallel group (today's ZeRO), then
        per scope the framework runs (and the shard_scope pin allows) one smaller group. Declared-space restriction
        (labelled): unpinned, that group is the dp replicas that fill the smallest node or NVLink domain of the
        allowed pools (shard_group x tp x cp GPUs inside it: its reduce-scatters and gathers stay on the scale-up
        fabric, and only the replicas' all-reduce of the gradient shards crosses the network [formulas C9]), at
        least 2, where the data-parallel group leaves that domain (inside it the whole group is the node-size
        group); a shard_group pin searches the values it names. Each needs its replicas to divide the
        expert data-parallel group (validation.check_shard_group). Whether the framework runs it at a ZeRO stage
        and pipeline depth is checked per candidate (capabilities.runs_shard_group)."""
        sp = self.space
        if "shard_group" in sp.pins or "shard_scope" in sp.pins:
            whole = np.array(
                [0 if sp.allows("shard_group", d) and sp.allows("shard_scope", "states") else -1 for d in dps]
            )
        else:
            whole = np.zeros(len(dps), dtype=np.int64)
        out = [ShardVariant.of(whole, "states")]
        scopes = [sc for sc in SHARD_SCOPES if sp.allows("shard_scope", sc) and self._shard_stages(key, sc)]
        if not scopes:
            return out
        pinned = sp.pinned_values("shard_group")
        unit = self.smallest_scale_up // (key.tp * key.cp)

        def fits(d: int, s: int) -> bool:
            if s < 1 or s >= d or d % s or not sp.allows("shard_group", s):
                return False
            edp = key.tp * d * key.cp // (key.ep * key.etp)
            return self.model.moe is None or edp % (d // s) == 0

        def node_group(d: int) -> int:  # the largest group of at most `unit` replicas, where dp leaves the domain
            if d <= unit:
                return -1
            return next((s for s in range(unit, 1, -1) if fits(d, s)), -1)

        if pinned is None:
            groups = [[node_group(d) for d in dps]]
        else:
            groups = [[int(v) if fits(d, int(v)) else -1 for d in dps] for v in sorted(set(pinned))]
        for group in groups:
            arr = np.array(group)
            if (arr > 0).any():
                out += [ShardVariant.of(arr, sc) for sc in scopes]
        return out

    def _tail_bound(self, key: LayerKey, dps: list[int], dense: float, expert: float) -> np.ndarray:
        """Per dp: a lower bound on the first stage's data-parallel collectives after its last backward when it
        holds `dense` parameters per GPU (and `expert` expert parameters), ZeRO 0-2. Whatever the framework hides
        under compute still slows it by OVERLAP_COMPUTE_SLOWDOWN of the collective (training.py, every branch of
        the DP sync: an all-reduce, or a reduce-scatter and a gather); the step is at least the pipeline plus the
        first stage's tail (training.step_time, no cool-down slack for stage 0)."""
        ctx, _ = self._probe(key)
        g = min(2.0, float(ctx.grad_bytes))  # DeepSpeed's bf16 optimizer all-reduces 2-byte gradients

        memo = self._sync_memo

        def sync(levels: tuple[net.Level, ...], params: float) -> float:
            hit = memo.get((levels, params, g))
            if hit is None:
                hit = memo[(levels, params, g)] = min(
                    net.all_reduce(levels, params * g),
                    net.all_gather(levels, params * g) + net.all_gather(levels, params * 2),
                )
            return hit

        out = np.zeros(len(dps))
        for j, d in enumerate(dps):
            dpc = d * key.cp
            edp = max(1, key.tp * key.cp * d // (key.ep * key.etp))
            best = math.inf
            for p in self.pools:
                tiers = ctx.tiers(p)
                t = sync(net.group_levels(tiers, dpc, key.tp), dense) if dpc > 1 and dense > 0 else 0.0
                if edp > 1 and expert > 0:
                    t += sync(net.group_levels(tiers, edp, key.etp * key.ep), expert)
                best = min(best, t)
            out[j] = OVERLAP_COMPUTE_SLOWDOWN * best
        return out

    def _shard_tail_bound(
        self, key: LayerKey, dps: list[int], dense: float, expert: float, shard: np.ndarray
    ) -> np.ndarray:
        """_tail_bound for the shard group shard[j] (dp replicas) of each dp value, scope 'states' (ZeRO-1/2; hpZ
        runs at ZeRO-3, which takes no tail): reduce-scatter (2-byte gradients at least) and gather (bf16, FP8 with
        FP8 primary weights) within the group, all-reduce of the shard over the replicas [formulas C9], on the
        pool where that is cheapest (0 where the group is not searched)."""
        ctx, _ = self._probe(key)
        g = min(2.0, float(ctx.grad_bytes))
        width = float(FP8_BYTES if self.w.fp8_param_gather else BF16_BYTES)
        out = np.zeros(len(dps))
        for j, d in enumerate(dps):
            s = int(shard[j])
            if s <= 0:
                continue
            memo = (key.tp, key.cp, key.ep, key.etp, d, s, dense, expert)
            hit = self._shard_tail_memo.get(memo)  # keys differing in mbs, SP, recompute... share it
            if hit is None:
                replicas_n, ets = d // s, key.etp * key.ep
                dense_ranks, expert_ranks = s * key.cp, max(1, key.tp * d * key.cp // (key.ep * key.etp) // replicas_n)
                hit = math.inf
                for p in self.pools:
                    lv = shard_levels(ctx.tiers(p), key.tp, dense_ranks, ets, expert_ranks, replicas_n, None)
                    t = 0.0
                    for levels, replicas, ranks, params in (
                        (lv[0], lv[2], dense_ranks, dense),
                        (lv[1], lv[3], expert_ranks, expert),
                    ):
                        if params > 0:
                            t += net.all_gather(levels, params * g) + net.all_gather(levels, params * width)
                            t += net.all_reduce(replicas, params * g / ranks)
                    hit = min(hit, t)
                self._shard_tail_memo[memo] = hit
            out[j] = OVERLAP_COMPUTE_SLOWDOWN * hit
        return out

    def _slot_bound(self, work: dict[str, float], gps: np.ndarray, p_max: int) -> np.ndarray:
        """slot_bound[k-1, j]: the least possible max stage work with k stages of gps[j] GPUs each (inf: no room):
        L / (sum of 1/a over the k fastest stage slots the pools can host, a = per-layer time on the slot's pool)."""
        L = self.model.num_layers
        ks = np.arange(1, max(p_max, 1) + 1, dtype=float)[:, None]
        harmonic = np.zeros((len(ks), len(gps)))
        filled = np.zeros(len(gps))
        for a, healthy in sorted((work[p.name] / L, p.plannable_gpus) for p in self.pools):
            if a > 0:
                slots = (healthy // gps).astype(float)
                harmonic += np.clip(ks - filled[None, :], 0.0, slots[None, :]) / a
                filled = filled + slots
        with np.errstate(divide="ignore"):
            bound: np.ndarray = np.where((ks <= filled[None, :]) & (harmonic > 0), L / harmonic, np.inf)
        return bound

    def _zero_stages(self, stages: tuple[int, ...]) -> tuple[int, ...]:
        """The framework's ZeRO stages the workload admits: FP8 primary weights need the distributed optimizer or
        FSDP (validation.check_fp8_param_gather)."""
        return tuple(z for z in stages if z > 0) if self.w.fp8_param_gather else stages

    def _vp_values(self) -> list[int]:
        """Virtual stages searched: the pinned values or the defaults, those the space and framework allow."""
        vps = self.space.pinned_values("vp") or DEFAULT_VP
        return [vp for vp in vps if self.space.allows("vp", vp) and (vp == 1 or self.fw.virtual_stages)]

    def _pipelines(
        self, key: LayerKey, vp: int, pps: list[int]
    ) -> Iterator[tuple[bool, np.ndarray, list[str], tuple[int, ...]]]:
        """(multi-stage, pp values, schedules, ZeRO stages) of the pipelines with `vp` virtual stages: one stage
        (pp = 1), then pp >= 2."""
        if 1 in pps and vp == 1:
            # symmetry (labelled): with one stage every schedule is the same computation; 1f1b stands for all
            yield False, np.array([1], dtype=np.int64), ["1f1b"], self._zero_stages(self.fw.zero_stages)
        if key.epo and vp == 1:  # Megatron: EP overlap with pp > 1 needs virtual stages
            return
        if key.off:  # activation offloading runs at pp = 1 only (validation.check_offload)
            return
        pv = np.array([p for p in pps if p >= 2 and self._admits(p, vp)], dtype=np.int64)
        if not len(pv):
            return
        if vp > 1:
            scheds = ["interleaved-1f1b"] if self._sched_ok("interleaved-1f1b") else []
        else:
            scheds = [x for x in ("1f1b", "zb-h1", "gpipe") if self._sched_ok(x)]
        yield True, pv, scheds, self._zero_stages(self.fw.zero_stages_with_pp)

    def _stage_time_bounds(self, t: KeyTerms, pv: np.ndarray, vp: int, multi: bool) -> tuple[np.ndarray, np.ndarray]:
        """(slowest stage, sum of the stages) lower bounds per (pp in pv, dp). The slowest stage is at least the
        mean, at least the capacity-aware slot bound, and at least the integer-layer bound of each layer type;
        each stage also pays its pipeline hops."""
        P = pv[:, None].astype(float)
        hops = (2 * vp * t.hop_arr[None, :]) if multi else np.zeros((1, len(t.dp_arr)))
        t_sum = t.layers_work + t.last_stage_extra + P * hops
        heaviest = t.slot_bound[pv - 1, :]
        L = self.model.num_layers
        for n, a in t.per_type:  # without a layout, stages hold multiples of vp layers (one layer type)
            step = vp if n == L and not self.fw.virtual_stage_layout else 1
            heaviest = np.maximum(heaviest, a * step * np.ceil(n / (step * P)))
        return np.maximum(t_sum / P, heaviest + hops), t_sum

    def _may_fit(
        self,
        t: KeyTerms,
        zero: int,
        sched: str,
        multi: bool,
        pv: np.ndarray,
        inflight: np.ndarray,
        states: dict[int, np.ndarray] | None = None,
        layer_states: list[dict[int, np.ndarray]] | None = None,
    ) -> np.ndarray:
        """Per (pp, dp): the mean per-GPU memory over the stages fits the largest usable memory, and with
        1F1B / ZB-H1 the staggered in-flight bound of each layer type does too (`states` and `layer_states` as a
        shard variant holds them; None: t.states and t.layer_types', the whole data-parallel group's)."""
        usable = max(self.usable.values())
        P = pv[:, None].astype(float)
        all_states = t.states if states is None else states
        ok: np.ndarray = (all_states[zero][None, :] + t.logits_bytes + inflight * t.activations) / P <= usable
        if multi and sched in ("1f1b", "zb-h1"):
            for i, (n, act, own) in enumerate(t.layer_types):
                per_zero = own if layer_states is None else layer_states[i]
                ok &= _staggered_memory_bound(n, per_zero[zero], act, pv, t.m_arr) <= usable
        return ok

    def _hop(self, gpus_per_stage: int, msg: float) -> float:
        """The fastest pipeline hop of `msg` bytes over the pools, for stages of `gpus_per_stage` GPUs."""
        hit = self._hops.get((gpus_per_stage, msg))
        if hit is None:
            hit = math.inf
            for p in self.pools:
                tier = net.neighbour_tier(net.cluster_tiers(self.cluster, p), gpus_per_stage)
                hit = min(hit, net.p2p(tier.bw, tier.network, msg))
            self._hops[(gpus_per_stage, msg)] = hit
        return hit

    def _state_memory(
        self, key: LayerKey, tag: str, dense_params: float, expert_params: float, dps: list[int]
    ) -> dict[int, np.ndarray]:
        """Per ZeRO stage, the bytes of weights, gradients and optimizer states of `dense_params` and
        `expert_params` on one GPU, for each dp (sharded over dp x cp; experts over the expert data-parallel
        group tp x dp x cp / (ep x etp)) [formulas A]. Cached per `tag` and the knobs that decide the dp values."""
        ck = (tag, key.tp, key.cp, key.ep, key.etp, key.mbs)
        hit = self._states.get(ck)
        if hit is None:
            fp8 = self.w.precision == "fp8"
            grad_bytes = 4 if self.w.grad_dtype == "fp32" else 2

            def per_param(zero: int, shards: int) -> float:
                w = self.w
                return sum(
                    state_bytes_per_param(
                        zero, shards, grad_bytes, fp8, w.fp8_param_gather, w.precision_aware_optimizer
                    )
                )

            hit = {
                zero: np.array(
                    [
                        dense_params * per_param(zero, d * key.cp)
                        + expert_params * per_param(zero, max(1, key.tp * d * key.cp // (key.ep * key.etp)))
                        for d in dps
                    ]
                )
                for zero in (0, 1, 2, 3)
            }
            self._states[ck] = hit
        return hit

    def _shard_states(
        self, key: LayerKey, tag: str, dense_params: float, expert_params: float, dps: list[int], v: ShardVariant
    ) -> dict[int, np.ndarray]:
        """_state_memory's bytes per ZeRO stage and dp as shard variant `v` holds them: a shard group of scope
        'states' shards them over shard_group x cp ranks (experts over expert dp / replicas); scope 'weights' adds
        hpZ's secondary bf16 partition, 2 B per parameter over shard_group x cp [formulas C9, C10]."""
        memo = (tag, key.tp, key.cp, key.ep, key.etp, key.mbs, v.scope, v.shard.tobytes())
        hit = self._shard_states_memo.get(memo)  # as _state_memory's cache: the knobs that decide the dp values
        if hit is not None:
            return hit
        base = self._state_memory(key, tag, dense_params, expert_params, dps)
        fp8, fp8_params = self.w.precision == "fp8", self.w.fp8_param_gather
        grad_bytes = 4 if self.w.grad_dtype == "fp32" else 2
        out = {}
        for zero, arr in base.items():
            values = arr.copy()
            for j in np.nonzero(v.shard > 0)[0]:
                d, s = dps[j], int(v.shard[j])
                if v.scope == "weights":
                    values[j] += secondary_weight_bytes(dense_params + expert_params, s * key.cp)
                    continue
                edp = max(1, key.tp * d * key.cp // (key.ep * key.etp))
                dense_b = state_bytes_per_param(zero, s * key.cp, grad_bytes, fp8, fp8_params)
                expert_b = state_bytes_per_param(zero, max(1, edp // (d // s)), grad_bytes, fp8, fp8_params)
                values[j] = dense_params * sum(dense_b) + expert_params * sum(expert_b)
            out[zero] = values
        self._shard_states_memo[memo] = out
        return out

    def _admits(self, pp: int, vp: int) -> bool:
        """Whether the model's layers split over pp ranks of vp virtual stages (stage_layers.LayerRules)."""
        hit = self._admitted.get((pp, vp))
        if hit is None:
            hit = self._admitted[(pp, vp)] = LayerRules.of(self.model, pp, vp, self.fw.virtual_stage_layout).admits()
        return hit

    def _pp_values(self, p_max: int) -> list[int]:
        """Pipeline degrees up to p_max the space allows (an MoE model's leading dense layers fit stage 0)."""
        hit = self._pps.get(p_max)
        if hit is None:
            hit = [pp for pp in range(1, p_max + 1) if self.space.allows("pp", pp) and self._admits(pp, 1)]
            self._pps[p_max] = hit
        return hit

    def _sched_ok(self, sched: str) -> bool:
        if sched not in self.fw.schedules:
            return False
        pinned = self.space.pinned_values("schedule")
        if pinned is not None:
            return sched in pinned
        return sched in self.space.schedules

    def all_candidates(self, prune_memory: bool = True) -> Iterator[Candidate]:
        """Every candidate of the space, key by key (the oracle's and the tests' enumeration; the planner expands
        keys lazily instead)."""
        for key in self.layer_keys():
            batch = self.key_batch(key, prune_memory=prune_memory)
            if batch is not None:
                for i in range(len(batch.lbs)):
                    yield self.candidate(batch, i)

    def candidate(self, batch: KeyBatch, index: int) -> Candidate:
        k = batch.key
        pp, vp, dp, code, zero, shard, scope = (int(x) for x in batch.rows[index])
        sched = SCHED_CODES[code]
        cfg = ParallelConfig(
            tp=k.tp,
            pp=pp,
            dp=dp,
            cp=k.cp,
            cp_comm=k.cpc,
            ep=k.ep,
            etp=None if k.etp == k.tp else k.etp,
            vp=vp,
            mbs=k.mbs,
            schedule=sched,
            sequence_parallel=k.sp,
            tp_comm_overlap=k.tpo,
            ep_comm_overlap=k.epo,
            ep_dispatch=k.epd,
            zero_stage=zero,
            shard_group=shard if shard > 0 else None,
            shard_scope=SHARD_SCOPES[scope] if shard > 0 else "states",
            recompute=k.recompute,
            recompute_modules=k.rc_modules,
            offload_layers=k.off,
        )
        m = self.w.global_batch_size // (dp * k.mbs)
        return Candidate(float(batch.lbs[index]), int(batch.gpus[index]), cfg, m)
