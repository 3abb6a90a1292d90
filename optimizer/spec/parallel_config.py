"""One parallel configuration: degrees, micro-batching, schedule, sharding, recomputation and stage layout."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from optimizer.spec.recompute_modules import DEFAULT_MODULES, RecomputeModule, normalise

Schedule = Literal["gpipe", "1f1b", "interleaved-1f1b", "zb-h1"]
Recompute = Literal["none", "selective", "full"]
CpComm = Literal["p2p", "allgather", "a2a"]
EpDispatch = Literal["alltoall", "deepep"]
ShardScope = Literal["states", "weights"]
SCHEDULES: tuple[Schedule, ...] = ("gpipe", "1f1b", "interleaved-1f1b", "zb-h1")
RECOMPUTES: tuple[Recompute, ...] = ("none", "selective", "full")
CP_COMMS: tuple[CpComm, ...] = ("p2p", "allgather", "a2a")
EP_DISPATCHES: tuple[EpDispatch, ...] = ("alltoall", "deepep")
SHARD_SCOPES: tuple[ShardScope, ...] = ("states", "weights")


class ParallelConfig(BaseModel):
    """Megatron-style 5-D parallelism. Rank order is tp (fastest) - cp - dp - pp, as Megatron's default."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tp: int = Field(default=1, ge=1, le=4096, description="Tensor-parallel degree.")
    pp: int = Field(default=1, ge=1, le=4096, description="Pipeline-parallel degree (physical stages).")
    dp: int = Field(
        default=1,
        ge=1,
        le=1_000_000,
        description="Data-parallel degree, count: model replicas; serving an MoE model with ep x etp = tp x dp, "
        "attention data-parallel ranks that share the experts (attention_dp).",
    )
    cp: int = Field(default=1, ge=1, le=4096, description="Context-parallel degree (sequence split in attention).")
    cp_comm: CpComm = Field(
        default="p2p",
        description="How context-parallel attention communicates (Megatron --cp-comm-type): p2p passes K/V blocks "
        "around a ring under the attention steps; allgather gathers K/V first, exposed (Llama 3); a2a swaps the "
        "sequence split for a head split with all-to-alls of Q, K, V and the output (DeepSpeed-Ulysses).",
    )
    ep: int = Field(
        default=1, ge=1, le=100_000, description="Expert-parallel degree, carved out of tp x dp x cp with etp."
    )
    etp: int | None = Field(
        default=None,
        ge=1,
        le=4096,
        description="Expert tensor-parallel degree (Megatron --expert-tensor-parallel-size); None = tp. Serving: "
        "tp x dp with ep 1 shards the experts over all attention-DP ranks' GPUs. Count of GPUs.",
    )
    vp: int = Field(default=1, ge=1, le=1024, description="Virtual stages (model chunks) per pipeline rank.")
    mbs: int = Field(default=1, ge=1, le=1_000_000, description="Micro-batch size, sequences.")
    schedule: Schedule = Field(default="1f1b", description="Pipeline schedule.")
    sequence_parallel: bool = Field(default=False, description="Megatron sequence parallelism (needs tp > 1).")
    zero_stage: int = Field(default=0, ge=0, le=3, description="ZeRO stage; 1 = Megatron distributed optimizer.")
    shard_group: int | None = Field(
        default=None,
        ge=1,
        le=1_000_000,
        description="Data-parallel replicas (a divisor of dp) in one sharding group, count; None = dp, the whole "
        "data-parallel group (a value equal to dp is stored as None). With shard_scope 'states' the ZeRO-sharded "
        "states live within groups of shard_group x cp ranks and the dp / shard_group groups replicate them, "
        "all-reducing their gradient shards: PyTorch HSDP (torchtitan data_parallel_shard_degree x "
        "data_parallel_replicate_degree), DeepSpeed MiCS (mics_shard_size), Megatron distributed-optimizer "
        "instances (--num-distributed-optimizer-instances = dp / shard_group). Needs zero_stage >= 1.",
    )
    shard_scope: ShardScope = Field(
        default="states",
        description="What shard_group partitions: 'states' (see shard_group); 'weights' = DeepSpeed ZeRO++ "
        "hierarchical partitioning (hpZ, zero_hpz_partition_size): the states stay sharded over the whole "
        "data-parallel group and a second copy of the bf16 weights is partitioned within each shard group after "
        "the forward, so that the backward's all-gathers stay inside it. 'weights' needs a shard_group and "
        "zero_stage 3.",
    )
    recompute: Recompute = Field(default="none", description="Activation recomputation.")
    recompute_modules: tuple[RecomputeModule, ...] | None = Field(
        default=None,
        description="With recompute=selective: Megatron's --recompute-modules (optimizer/spec/recompute_modules.py); "
        "None = Megatron's default ('core_attn').",
    )
    layers_per_stage: list[int] | None = Field(
        default=None, description="Layers on each physical stage (uneven allowed); None = even split."
    )
    pipeline_layout: str | None = Field(
        default=None,
        max_length=10_000,
        description="Megatron --pipeline-model-parallel-layout (e.g. 'Et*2|(t*2|)*34,t*3|(t*2|)*3,tL'): the decoder "
        "layers of every virtual stage; sets the layers per stage and needs vp = stages / pp.",
    )
    stage_pools: list[str] | None = Field(
        default=None, description="Pool each stage runs on; None = the first pool with room."
    )
    overlap_grad_reduce: bool = Field(default=True, description="Overlap DP gradient reduction with backward.")
    tp_comm_overlap: bool = Field(default=False, description="Overlap TP collectives with GEMMs (needs SP).")
    ep_comm_overlap: bool = Field(
        default=False,
        description="Overlap the EP all-to-all with another micro-batch's compute (Megatron "
        "--overlap-moe-expert-parallel-comm; needs ep > 1, no full recompute, vp > 1 when pp > 1).",
    )
    ep_dispatch: EpDispatch = Field(
        default="alltoall",
        description="How MoE tokens reach their experts: 'alltoall' sends each routed copy to its expert's GPU; "
        "'deepep' sends one copy per destination node over the network and forwards it over NVLink inside the node "
        "(DeepEP / HybridEP: Megatron --moe-token-dispatcher-type flex; torchtitan's DeepEP token dispatcher).",
    )
    offload_layers: int = Field(
        default=0,
        ge=0,
        le=100_000,
        description="Training: transformer layers whose activations go to host memory during the forward and come "
        "back for the backward (Megatron --cpu-offloading --cpu-offloading-num-layers, Transformer Engine's CPU "
        "offload); needs pp = 1 and no recompute.",
    )
    redundant_experts: int = Field(
        default=0,
        ge=0,
        le=4096,
        description="Serving: extra replicas of routed experts per MoE layer, placed by the engine's expert load "
        "balancer, so that (experts + redundant) / ep whole experts sit on each EP rank (SGLang "
        "--ep-num-redundant-experts, vLLM --num-redundant-experts with --enable-eplb; DeepSeek-V3 decode ran 256 + "
        "32 on EP72, LMSYS large-scale EP blog). Count of expert replicas.",
    )

    @model_validator(mode="before")
    @classmethod
    def _whole_group_is_none(cls, data: object) -> object:
        """A shard group of all dp replicas is today's behaviour: stored as None (with the default scope)."""
        if isinstance(data, dict) and data.get("shard_group") is not None and data["shard_group"] == data.get("dp", 1):
            data = {**data, "shard_group": None}
            data.pop("shard_scope", None)
        return data

    @field_validator("recompute_modules")
    @classmethod
    def _canonical_modules(cls, v: tuple[RecomputeModule, ...] | None) -> tuple[RecomputeModule, ...] | None:
        return None if v is None else normalise(v)

    @property
    def modules(self) -> frozenset[str]:
        """The selective recompute modules in effect (empty unless recompute is selective)."""
        if self.recompute != "selective":
            return frozenset()
        return frozenset(self.recompute_modules if self.recompute_modules is not None else DEFAULT_MODULES)

    def expert_slots(self, num_experts: int) -> int:
        """Expert copies per MoE layer over the EP group: the routed experts plus the redundant replicas."""
        return num_experts + self.redundant_experts

    def expert_copies(self, num_experts: int) -> float:
        """Copies per routed expert on average, (experts + redundant) / experts: what the replicas add to the
        routed weights held and read."""
        return self.expert_slots(num_experts) / num_experts

    @property
    def state_replicas(self) -> int:
        """Copies of the ZeRO-sharded training state over the data-parallel group: dp / shard_group with a
        shard_group of scope 'states', else 1 (the state sharded over all dp x cp ranks)."""
        if self.shard_group is None or self.shard_scope != "states":
            return 1
        return max(1, self.dp // self.shard_group)

    @property
    def secondary_shard_ranks(self) -> int | None:
        """Ranks of one ZeRO++ hpZ secondary weight partition (shard_group x cp, scope 'weights'), else None."""
        if self.shard_group is None or self.shard_scope != "weights":
            return None
        return self.shard_group * self.cp

    @property
    def gpus(self) -> int:
        """GPUs used: tp x cp x dp x pp."""
        return self.tp * self.cp * self.dp * self.pp

    @property
    def expert_tp(self) -> int:
        """Tensor-parallel degree of the expert layers: etp, or tp when not set (Megatron's default)."""
        return self.etp if self.etp is not None else self.tp

    @property
    def attention_dp(self) -> bool:
        """Serving attention data parallelism: the dp ranks of a stage run attention apart, each on its own sequences
        and KV cache, and share the routed experts spread over all tp x dp GPUs (ep x etp = tp x dp: TensorRT-LLM
        enable_attention_dp, SGLang --enable-dp-attention, vLLM --data-parallel-size on an MoE model). Otherwise
        (etp = tp, ep 1) the dp ranks are independent replicas."""
        return self.dp > 1 and self.ep * self.expert_tp == self.tp * self.dp

    @property
    def expert_dp(self) -> int:
        """Expert data-parallel degree: the stage's tp x cp x dp GPUs over etp x ep [MLM parallel_state.py:
        expert_data_parallel_size = world / (etp x ep x pp)]."""
        return max(1, self.tp * self.cp * self.dp // (self.ep * self.expert_tp))

    @property
    def gpus_per_stage(self) -> int:
        """GPUs of one pipeline stage: tp x cp x dp."""
        return self.tp * self.cp * self.dp

    def stage_layers(self, num_layers: int) -> list[int]:
        """Layers per physical stage (even split when not given)."""
        if self.layers_per_stage is not None:
            return list(self.layers_per_stage)
        base, extra = divmod(num_layers, self.pp)
        return [base + (1 if i < extra else 0) for i in range(self.pp)]
