"""Memory screens of the training search: lower bounds on a candidate's per-GPU memory (its states after ZeRO
sharding, per shard variant, its logits and its activations in flight) that drop the (pp, dp) candidates of a key
that cannot fit anywhere, before the stage model sees them [formulas A]."""

from __future__ import annotations

import numpy as np

from optimizer.costmodel.memory import state_bytes_per_param
from optimizer.costmodel.terms.data_parallel import secondary_weight_bytes
from optimizer.search.key_batch import KeyTerms, LayerKey, ShardVariant
from optimizer.search.space import SearchSpace
from optimizer.search.space_domains import SpaceDomains
from optimizer.spec.cluster_spec import ClusterSpec
from optimizer.spec.model_spec import ModelSpec
from optimizer.spec.workload import TrainingWorkload


def staggered_memory_bound(
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


def least_inflight(sched: str, P: np.ndarray, M: np.ndarray, vp: int, layers: int, flexible: bool) -> np.ndarray:
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


class MemoryScreens(SpaceDomains):
    """The declared space with its memory screens."""

    def __init__(self, model: ModelSpec, cluster: ClusterSpec, w: TrainingWorkload, space: SearchSpace) -> None:
        super().__init__(model, cluster, w, space)
        self._shard_states_memo: dict[tuple[object, ...], dict[int, np.ndarray]] = {}
        self._states: dict[tuple[str, int, int, int, int, int], dict[int, np.ndarray]] = {}

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
                ok &= staggered_memory_bound(n, per_zero[zero], act, pv, t.m_arr) <= usable
        return ok

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
