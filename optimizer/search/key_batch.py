"""The key batches of the training search: a layer key (the knobs that decide one layer's cost), the candidates of
one key with their lower bounds sorted (KeyBatch), the terms they share (KeyTerms) and the shard variants searched
for them. candidates.TrainingSpace fills them; the planner expands them lazily."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from optimizer.spec.parallel_config import SHARD_SCOPES, CpComm, EpDispatch, ParallelConfig, ShardScope

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


class KeyColumns:
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
