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
from collections.abc import Iterator

import numpy as np

from optimizer.costmodel.memory import activation_bytes_per_layer
from optimizer.costmodel.stage import stage_cost
from optimizer.search.bounds import TimeBounds, layer_work, pipeline_lower_bound
from optimizer.search.key_batch import SCHED_CODES, Candidate, KeyBatch, KeyColumns, KeyTerms, LayerKey
from optimizer.search.memory_screens import least_inflight
from optimizer.search.space import MAX_PP
from optimizer.spec.parallel_config import SHARD_SCOPES, ParallelConfig

# Callers import the space and its records from here (the modules above are their homes).
__all__ = ["Candidate", "KeyBatch", "LayerKey", "TrainingSpace", "layer_work", "pipeline_lower_bound"]


def _divisors(n: int) -> list[int]:
    """The divisors of n, ascending."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return small + [n // d for d in reversed(small) if d * d != n]


class TrainingSpace(TimeBounds):
    """The declared training search space of one (model, cluster, workload, space), and its bounds: its domains
    (space_domains.py), memory screens (memory_screens.py) and step-time bounds (bounds.py), and here the key
    batches built from them."""

    def key_batch(self, key: LayerKey, prune_memory: bool = True) -> KeyBatch | None:
        """Every candidate of `key`, with lower bounds, sorted; None when none is left. `prune_memory=False`
        keeps the candidates the memory bound proves infeasible (the oracle checks them the long way)."""
        with np.errstate(invalid="ignore"):  # inf x 0 where a pipeline has no room: masked out
            return self._key_batch(key, prune_memory)

    def _key_batch(self, key: LayerKey, prune_memory: bool) -> KeyBatch | None:
        t = self._key_terms(key)
        if t is None:
            return None
        cols = KeyColumns()
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
                    inflight = least_inflight(sched, P, M, vp, self.model.num_layers, self.fw.virtual_stage_layout)
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
