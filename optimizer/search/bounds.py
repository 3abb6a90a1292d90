"""Step-time lower bounds of the training search: every term a cost-model term [training.pipeline_time] for a
perfectly balanced, fractional split on the fastest allowed pool, per layer key (key_bound, key_cost_bound) and per
(pp, dp) of a key (the stage-time, pipeline-hop and data-parallel tail bounds the key batches add up)."""

from __future__ import annotations

import math
from typing import TypeVar

import numpy as np

from optimizer.costmodel import network as net
from optimizer.costmodel.constants import BF16_BYTES, FP8_BYTES, OVERLAP_COMPUTE_SLOWDOWN
from optimizer.costmodel.stage import CostContext, LayerCost, PoolFacts, StageCost
from optimizer.costmodel.terms.data_parallel import shard_levels
from optimizer.search.key_batch import KeyTerms, LayerKey
from optimizer.search.memory_screens import MemoryScreens
from optimizer.search.space import SearchSpace
from optimizer.spec.cluster_spec import ClusterSpec, NodePool
from optimizer.spec.model_spec import ModelSpec
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import TrainingWorkload


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


class TimeBounds(MemoryScreens):
    """The declared space with its memory screens and step-time bounds."""

    def __init__(self, model: ModelSpec, cluster: ClusterSpec, w: TrainingWorkload, space: SearchSpace) -> None:
        super().__init__(model, cluster, w, space)
        self._probes: dict[LayerKey, tuple[CostContext, dict[str, float]]] = {}
        self._sync_memo: dict[tuple[tuple[net.Level, ...], float, float], float] = {}  # _tail_bound collectives
        self._shard_tail_memo: dict[tuple[int, int, int, int, int, int, float, float], float] = {}
        self.dense_memo: dict[tuple[object, ...], LayerCost] = {}
        self.pool_facts = PoolFacts()  # the cluster's per-pool GPU, tiers and reserve, shared by every context
        self._stage_caches: dict[tuple[object, ...], dict[tuple[bool, bool, int, int, str, str | None], StageCost]] = {}
        self._hops: dict[tuple[int, float], float] = {}

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
