"""The declared training search space, knob by knob: the degrees, micro-batch sizes, communication kinds, recompute
and offload choices, shard groups, virtual stages, pipeline depths and schedules the framework runs and the space
allows, with the dominance and symmetry cuts each domain makes (labelled). candidates.TrainingSpace builds on it."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from optimizer.costmodel.framework_runtime import runtime
from optimizer.costmodel.memory import training_reserve_bytes
from optimizer.frameworks.capabilities import (
    Framework,
    deepspeed_release,
    expert_tp_values,
    framework,
    runs_expert_tp,
    runs_shard_group,
    runs_tp_comm_overlap,
    searched_zero_stages,
)
from optimizer.search.key_batch import LayerKey, ShardVariant
from optimizer.search.space import DEFAULT_MBS, DEFAULT_VP, MIN_TOKENS_PER_CP_RANK, SearchSpace
from optimizer.spec.cluster_spec import ClusterSpec, NodePool
from optimizer.spec.model_spec import ModelSpec
from optimizer.spec.names import priced_framework
from optimizer.spec.parallel_config import RECOMPUTES, SHARD_SCOPES, CpComm, EpDispatch
from optimizer.spec.recompute_modules import searched_modules
from optimizer.spec.stage_layers import LayerRules
from optimizer.spec.workload import TrainingWorkload


class SpaceDomains:
    """The values each knob of one (model, cluster, workload, space) takes in the search."""

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
        self._searched: dict[tuple[int, str, bool], bool] = {}  # _searches_shard
        self._searched_stages: dict[tuple[str, bool], bool] = {}  # _shard_stages
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
            release = deepspeed_release(self.w)
            hit = runs_shard_group(self.fw, zero, scope, model_parallel, release) and (
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
            yield (
                False,
                np.array([1], dtype=np.int64),
                ["1f1b"],
                self._zero_stages(searched_zero_stages(self.fw, False, key.tp, key.cp, key.ep)),
            )
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
        yield True, pv, scheds, self._zero_stages(searched_zero_stages(self.fw, True, key.tp, key.cp, key.ep))

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
