"""The three training frameworks as data: what each can run, every knob with its citation (the frameworks' own
code, at the snapshots capabilities.py names). capabilities.py reads them; the rules over them live there."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from optimizer.spec.names import AttentionKernel, FrameworkName
from optimizer.spec.parallel_config import CpComm, EpDispatch, Recompute, Schedule


@dataclass(frozen=True, slots=True)
class Framework:
    """One training framework's capabilities: what it can run (how it runs is costmodel/framework_runtime.py)."""

    name: FrameworkName
    title: str
    schedules: tuple[Schedule, ...]
    """Pipeline schedules it implements."""
    zero_stages: tuple[int, ...]
    """Sharding stages (see the module docstring) with pp = 1."""
    zero_stages_with_pp: tuple[int, ...]
    """Sharding stages it combines with pipeline parallelism (pp > 1)."""
    context_parallel: bool
    """Context parallelism (the sequence split over ranks in attention)."""
    cp_comms: tuple[CpComm, ...]
    """How its context-parallel attention may communicate (ParallelConfig.cp_comm)."""
    expert_parallel: bool
    expert_tensor_parallel: Literal["any", "one_with_ep", "tp"]
    """Expert tensor-parallel degree it runs: any (Megatron --expert-tensor-parallel-size), 1 whenever ep > 1
    (torchtitan: EP borrows its ranks from FSDP and TP), or always tp (experts inside data parallelism)."""
    virtual_stages: bool
    """Several model chunks per pipeline rank (interleaved schedule)."""
    uneven_layers: bool
    """Stages may hold different numbers of layers."""
    virtual_stage_layout: bool
    """Virtual stages may hold different numbers of layers (a custom layout), so a rank's layers need not be a
    multiple of vp and the embedding / loss can take a layer's place (stage_layers.LayerRules)."""
    tp_comm_overlap: bool
    """TP collectives overlapped with the GEMMs that produce or consume them (inside one NVLink domain only)."""
    ep_comm_overlap: bool
    """EP all-to-all of one micro-batch overlapped with another micro-batch's compute (combined 1F1B)."""
    ep_dispatches: tuple[EpDispatch, ...]
    """How it can move MoE tokens to their experts (ParallelConfig.ep_dispatch; costmodel/ep_dispatch.py)."""
    sequence_parallel: bool
    recomputes: tuple[Recompute, ...]
    recompute_modules: bool
    """Selective recompute by named modules (optimizer/spec/recompute_modules.py); otherwise selective means the
    attention core only."""
    overlap_grad_reduce: bool
    """Gradient reduction overlapped with the backward pass."""
    shard_group_stages: tuple[int, ...]
    """ZeRO stages at which the states may be sharded within groups smaller than the data-parallel group and
    replicated across them (ParallelConfig.shard_group, scope 'states')."""
    shard_group_weights: bool
    """A secondary partition of the weights within a smaller group (ParallelConfig.shard_scope 'weights', ZeRO++
    hpZ), at ZeRO-3."""
    shard_group_model_parallel: bool
    """Whether a shard group combines with tensor, pipeline or expert parallelism (DeepSpeed builds its MiCS and
    hpZ groups from consecutive world ranks, so only pure data parallelism keeps them data-parallel)."""
    mtp: bool
    """Trains multi-token prediction modules (ModelSpec.mtp_layers)."""
    activation_offload: bool
    """Offloads the activations of whole layers to host memory (ParallelConfig.offload_layers)."""
    fp8_param_gather: bool
    """Keeps FP8 primary weights and all-gathers them in FP8 (TrainingWorkload.fp8_param_gather)."""
    precision_aware_optimizer: bool
    """Keeps the fp32 master weights as 16-bit remainders (TrainingWorkload.precision_aware_optimizer)."""
    attention_kernel: AttentionKernel
    """The fused-attention kernel it runs by default (TrainingWorkload.attention_kernel overrides)."""
    sources: tuple[tuple[str, str], ...]
    """(knob, citation) pairs."""
    ddp_alone: bool = False
    """Plain data parallelism (zero_stage 0) only as the whole parallelism: with dp > 1 no tp, pp or ep beside it,
    and no cp at all (torchtitan shards over the cp ranks with FSDP whenever cp > 1)."""
    precisions: tuple[str, ...] = ("bf16", "fp16", "fp8")
    """GEMM precisions it trains in (TrainingWorkload.precision)."""
    grad_dtypes: tuple[str, ...] = ("fp32", "bf16")
    """Gradient reduction dtypes it runs (TrainingWorkload.grad_dtype)."""
    async_checkpoint: bool = False
    """Saves checkpoints asynchronously: training blocks only for the copy of its state to host memory, a
    background process writes it (costmodel/goodput.py)."""

    def source(self, knob: str) -> str:
        """The citation for one knob."""
        return dict(self.sources).get(knob, "")


MEGATRON = Framework(
    # Megatron-LM d98e8a6 megatron/training/config/training_config.py: async_save (--async-save) with
    # core/dist_checkpointing/strategies/async_utils.py (the write runs in a background process after the
    # state is staged in host memory); fully_parallel_save default True (the save is spread over the DP ranks).
    async_checkpoint=True,
    name="megatron",
    title="Megatron-Core / Megatron-LM",
    schedules=("1f1b", "interleaved-1f1b"),
    zero_stages=(0, 1, 2, 3),
    zero_stages_with_pp=(0, 1),
    context_parallel=True,
    cp_comms=("p2p", "allgather", "a2a"),
    expert_parallel=True,
    expert_tensor_parallel="any",
    virtual_stages=True,
    uneven_layers=True,
    virtual_stage_layout=True,
    tp_comm_overlap=True,
    ep_comm_overlap=True,
    ep_dispatches=("alltoall", "deepep"),
    sequence_parallel=True,
    recomputes=("none", "selective", "full"),
    recompute_modules=True,
    overlap_grad_reduce=True,
    shard_group_stages=(1, 2, 3),
    shard_group_weights=False,
    shard_group_model_parallel=True,
    mtp=True,
    activation_offload=True,
    fp8_param_gather=True,
    precision_aware_optimizer=True,
    attention_kernel="fa3",
    sources=(
        (
            "attention_kernel",
            "TE DotProductAttention prefers FusedAttention (cuDNN) over flash-attn on Hopper and newer "
            "(transformer_engine/pytorch/attention/dot_product_attention/utils.py get_attention_backend, d0067d0)",
        ),
        (
            "offload_layers",
            "--cpu-offloading-num-layers N, which turns cpu_offloading on (arguments.py; TE "
            "get_cpu_offload_context): the first N layers' activations to host memory; pp = 1, no recompute, "
            "N < layers (transformer_config.py __post_init__)",
        ),
        (
            "fp8_param_gather",
            "--fp8-param-gather (TE quantized_model_init): FP8 primary weights, all-gathered in FP8; "
            "Megatron-Bridge's FP8 mixed-precision configs set it (training/mixed_precision.py)",
        ),
        (
            "precision_aware_optimizer",
            "--use-precision-aware-optimizer: TE FusedAdam with master_weights and store_param_remainders "
            "(OptimizerConfig default True; megatron/core/optimizer/__init__.py, d98e8a6), which keeps an int16 "
            "remainder beside each bf16 parameter (transformer_engine/pytorch/optimizers/fused_adam.py "
            "_initialize_state, d0067d0); NeMo's performance scripts set it for BF16 (scripts/performance/helpers.py "
            "set_precision_configs, 830b06a)",
        ),
        (
            "expert_gemm",
            "--moe-grouped-gemm: TEGroupedMLP -> TE GroupedLinear -> nvte_multi_tensor_gemm, which on Hopper runs one "
            "cuBLAS GEMM per local expert round-robin over 4 compute streams (common/gemm/cublaslt_gemm.cu "
            "multi_stream_cublas_gemm; util/multi_stream.cpp num_compute_streams = 4) unless "
            "NVTE_USE_CUTLASS_GROUPED_GEMM=1, which the Megatron-Bridge recipes do not set",
        ),
        (
            "schedule",
            "megatron/core/pipeline_parallel/schedules.py: forward_backward_pipelining_without_interleaving"
            " (1F1B) and _with_interleaving (--num-virtual-stages-per-pipeline-rank); no GPipe, no zero-bubble",
        ),
        (
            "zero",
            "--use-distributed-optimizer (ZeRO-1); --use-megatron-fsdp with --data-parallel-sharding-strategy "
            "optim_grads / optim_grads_params (ZeRO-2/3, megatron/core/distributed/fsdp); --use-torch-fsdp2 'is not "
            "supported with pipeline parallelism' (megatron/training/arguments.py)",
        ),
        ("cp", "--context-parallel-size, --cp-comm-type p2p (ring)"),
        (
            "cp_comm",
            "--cp-comm-type p2p|allgather|a2a (TransformerConfig.cp_comm_type; Transformer Engine d0067d0 "
            "attention/dot_product_attention/context_parallel.py AttnFuncWithCPAndKVP2P, "
            "AttnFuncWithCPAndKVAllGather 'KV all-gather between CP ranks is exposed', AttnFuncWithCPAndQKVOA2A "
            "'requires num_heads % cp_size == 0'); a2a+p2p (hierarchical) is not modelled",
        ),
        (
            "mtp",
            "--mtp-num-layers (megatron/core/transformer/multi_token_prediction.py; layout symbol m, "
            "pipeline_parallel_layer_layout.py)",
        ),
        (
            "fp8",
            "--fp8-format: Transformer Engine FP8 inside the transformer layers (transformer_block.py "
            "get_fp8_context); the output layer is tensor_parallel.ColumnParallelLinear, a BF16 GEMM, unless MXFP8 "
            "output projection is on (gpt_model.py is_mxfp8_output_proj_active, Blackwell)",
        ),
        ("ep", "--expert-model-parallel-size"),
        (
            "etp",
            "--expert-tensor-parallel-size (ModelParallelConfig.expert_tensor_parallel_size; default tp); expert "
            "grid etp x ep x expert-dp over each stage's tp x cp x dp (megatron/core/parallel_state.py)",
        ),
        (
            "vp",
            "--num-virtual-stages-per-pipeline-rank; uneven stages: --decoder-first/last-pipeline-num-layers, "
            "--pipeline-model-parallel-layout (any decoder layers per virtual stage, empty stages allowed: "
            "megatron/core/transformer/pipeline_parallel_layer_layout.py, docs/user-guide/features/"
            "pipeline_parallel_layout.md, Megatron-LM d98e8a6)",
        ),
        (
            "tp_comm_overlap",
            "--tp-comm-overlap: Transformer Engine userbuffers (initialize_ub), a node-local TP group over NVLink; "
            "priced at the ideal overlap (no published on/off pair; the recipes that run it are priced within "
            "their groups)",
        ),
        ("sp", "--sequence-parallel"),
        (
            "ep_comm_overlap",
            "--overlap-moe-expert-parallel-comm (ModelParallelConfig.overlap_moe_expert_parallel_comm: EP A2A "
            "overlapped with independent computation of another micro-batch; needs ep > 1, alltoall/flex "
            "dispatcher, no full recompute, vp when pp > 1: transformer_config.py; one more warm-up micro-batch: "
            "schedules.py get_pp_rank_microbatches)",
        ),
        (
            "ep_dispatch",
            "--moe-token-dispatcher-type alltoall | flex with --moe-flex-dispatcher-backend deepep | hybridep "
            "(TransformerConfig.moe_token_dispatcher_type / moe_flex_dispatcher_backend, transformer_config.py, "
            "Megatron-LM d98e8a6); node-limited routing --moe-router-num-groups / --moe-router-group-topk",
        ),
        ("recompute", "--recompute-granularity selective|full"),
        (
            "recompute_modules",
            "--recompute-modules core_attn layernorm mla_up_proj moe_act mlp moe shared_experts "
            "(TransformerConfig.recompute_modules, Megatron-LM d98e8a6)",
        ),
        ("overlap_grad_reduce", "--overlap-grad-reduce, --overlap-param-gather (DistributedDataParallelConfig)"),
        (
            "shard_group",
            "--num-distributed-optimizer-instances = dp / shard_group (arguments.py; parallel_state.py: "
            "intra-partial data-parallel groups of dp x cp / instances consecutive dp-cp ranks, experts' "
            "expert-dp / instances; param_and_grad_buffer.py start_grad_sync: reduce-scatter within the instance, "
            "then all-reduce of the shard across instances, param all-gather within it). The same flag makes "
            "Megatron-FSDP hybrid-sharded (mcore_fsdp_adapter.py enable_hsdp, --outer-dp-sharding-strategy "
            "no_shard: the outer all-reduce only on the last micro-batch, megatron_fsdp.py)",
        ),
        ("shard_scope", "no secondary weight partition (ZeRO++ hpZ) in Megatron"),
        ("pp", "scatter/gather of p2p tensors over TP ranks [N21 §4.1]; grads reduced under the last backward"),
        (
            "zero3",
            "Megatron-FSDP: one all-gather per layer, prefetched (megatron/core/distributed/fsdp/src/docs/"
            "mfsdp_design.md)",
        ),
    ),
)

DEEPSPEED = Framework(
    name="deepspeed",
    title="DeepSpeed (incl. Megatron-DeepSpeed's pipeline)",
    schedules=("1f1b",),
    zero_stages=(0, 1, 2, 3),
    zero_stages_with_pp=(0, 1),
    context_parallel=False,
    cp_comms=("p2p",),
    expert_parallel=True,
    expert_tensor_parallel="tp",
    virtual_stages=False,
    uneven_layers=True,
    virtual_stage_layout=False,
    tp_comm_overlap=False,
    ep_comm_overlap=False,
    ep_dispatches=("alltoall",),
    sequence_parallel=True,
    recomputes=("none", "selective", "full"),
    recompute_modules=False,
    overlap_grad_reduce=True,
    shard_group_stages=(3,),
    shard_group_weights=True,
    shard_group_model_parallel=False,
    mtp=False,
    activation_offload=False,
    fp8_param_gather=False,
    precision_aware_optimizer=False,
    attention_kernel="fa2",
    sources=(
        (
            "attention_kernel",
            "Megatron-DeepSpeed's --use-flash-attn-v2 (flash-attn 2.x flash_attn_func), as its example scripts set",
        ),
        ("schedule", "deepspeed/runtime/pipe/schedule.py TrainSchedule: synchronous 1F1B only"),
        (
            "bf16_optimizer",
            "deepspeed/runtime/engine.py _do_optimizer_sanity_check: bf16 + ZeRO 0 (grad_accum_dtype fp32) -> "
            "BF16_Optimizer; pipe/engine.py _exec_backward_pass: clear_lp_grads + update_hp_grads every micro-batch "
            "(bf16_optimizer.py _update_hp_grad: hp_grad.add_(lp.grad.to(fp32))); _bf16_reduce_grads -> "
            "buffered_allreduce_fallback (all_reduce, communication_data_type bf16); update_lp_params -> "
            "all_gather_dp_groups (DeepSpeed 38327e0, 2025-02)",
        ),
        ("zero", "deepspeed/runtime/pipe/engine.py: 'ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism'"),
        (
            "cp",
            "DeepSpeed-Ulysses (deepspeed/sequence) is all-to-all sequence parallelism, not ring attention: not "
            "modelled",
        ),
        ("cp_comm", "no context parallelism in the modelled DeepSpeed stack"),
        ("ep", "deepspeed/moe ep_size"),
        ("mtp", "no multi-token prediction module in DeepSpeed or Megatron-DeepSpeed"),
        ("fp8_param_gather", "no FP8 primary weights in DeepSpeed's ZeRO or Megatron-DeepSpeed"),
        (
            "precision_aware_optimizer",
            "DeepSpeed's optimizers keep full fp32 master weights (runtime/bf16_optimizer.py, zero/stage_1_and_2.py)",
        ),
        (
            "offload_layers",
            "activation_checkpointing.cpu_checkpointing moves the checkpoints of full recompute, not a layer's "
            "activations",
        ),
        (
            "expert_gemm",
            "deepspeed/moe/experts.py Experts.forward: a Python loop calls each local expert's MLP in turn on its "
            "chunk",
        ),
        (
            "fp8",
            "FP8 through Transformer Engine layers (Megatron-DeepSpeed --transformer-impl transformer_engine); "
            "the output layer stays a BF16 tensor-parallel linear",
        ),
        ("etp", "experts are not tensor-parallel apart from tp (ep_size splits the data-parallel group)"),
        ("ep_comm_overlap", "no overlap of one micro-batch's all-to-all with another's compute (deepspeed/moe)"),
        ("ep_dispatch", "deepspeed/moe/sharded_moe.py: _AllToAll over the EP group, one copy per routed token"),
        ("vp", "PipelineModule partition_method (uneven stages); no interleaved schedule"),
        ("tp_comm_overlap", "no TP/GEMM overlap in DeepSpeed or Megatron-DeepSpeed"),
        ("sp", "Megatron-DeepSpeed --sequence-parallel"),
        ("recompute", "activation_checkpointing; Megatron-DeepSpeed --recompute-granularity"),
        ("recompute_modules", "Megatron-DeepSpeed's selective recompute is the attention core only"),
        ("overlap_grad_reduce", "zero_optimization.overlap_comm (default true for stage 3, runtime/zero/config.py)"),
        (
            "shard_group",
            "MiCS at ZeRO-3: zero_optimization.mics_shard_size (runtime/zero/config.py; engine.py "
            "_configure_zero_optimizer -> MiCS_Optimizer): every state sharded within consecutive world ranks "
            "(mics_utils.py _generate_mics_config(world_size, ..., pp_size=1)), gradients reduce-scattered there "
            "and all-reduced across the replicate groups at the accumulation boundary (mics.py "
            "allreduce_mics_shard_grads); the groups are world ranks, so tp = pp = ep = 1",
        ),
        (
            "shard_scope",
            "ZeRO++ hpZ at ZeRO-3: zero_optimization.zero_hpz_partition_size (runtime/zero/config.py; "
            "partition_parameters.py _partition_param_sec: a secondary bf16 partition of tensor / hpz after the "
            "forward; backward all-gathers over the intra group; utils/groups.py _create_zero_param_parallel_group: "
            "consecutive world ranks, so tp = pp = ep = 1)",
        ),
        (
            "pp",
            "runtime/pipe/p2p.py send (isend, or broadcast in a 2-rank group) after each forward and backward, "
            "not overlapped; runtime/pipe/schedule.py TrainSchedule: ReduceGrads, OptimizerStep after the last "
            "micro-batch. The engine partitions the sent activation over the TP ranks by default "
            "(runtime/config.py pipeline.pipe_partitioned = True; engine.py PartitionedTensor, gathered again on "
            "the receiver), but priced so the Megatron-DeepSpeed records come out 4-8 points too fast (BigScience "
            "group median 4.2% -> 8%, MT-NLG -17% -> -20%): some cost of its pipeline is still missing, and the "
            "full-tensor send stands in for it (pp_scatter_gather False)",
        ),
        (
            "zero3",
            "runtime/zero/partitioned_param_coordinator.py fetch_sub_module: one all-gather per submodule "
            "(Megatron-DeepSpeed layer: 2 norms, QKV, out proj, h->4h, 4h->h), prefetch up to "
            "stage3_prefetch_bucket_size = 5e7 parameters ahead; reduce_bucket_size 5e8",
        ),
    ),
)

TORCHTITAN = Framework(
    # torchtitan b5bcd76 torchtitan/components/checkpointer/dcp.py: async_mode "async" / "async_with_pinned_mem"
    # (torch.distributed.checkpoint async_save: staged to pinned host memory, written by a background thread).
    async_checkpoint=True,
    name="torchtitan",
    title="torchtitan (FSDP2 + TP + PP + CP)",
    schedules=("gpipe", "1f1b", "interleaved-1f1b"),
    zero_stages=(0, 2, 3),
    zero_stages_with_pp=(1,),
    ddp_alone=True,
    precisions=("bf16", "fp8"),
    grad_dtypes=("fp32",),
    context_parallel=True,
    cp_comms=("p2p",),
    expert_parallel=True,
    expert_tensor_parallel="one_with_ep",
    virtual_stages=True,
    uneven_layers=True,
    virtual_stage_layout=True,
    tp_comm_overlap=True,
    ep_comm_overlap=False,
    ep_dispatches=("alltoall",),
    sequence_parallel=True,
    recomputes=("none", "selective", "full"),
    recompute_modules=False,
    overlap_grad_reduce=True,
    shard_group_stages=(1, 2, 3),
    shard_group_weights=False,
    shard_group_model_parallel=True,
    mtp=False,
    activation_offload=False,
    fp8_param_gather=False,
    precision_aware_optimizer=False,
    attention_kernel="fa3",
    sources=(
        (
            "attention_kernel",
            "ScaledDotProductAttention runs SDPA with cuDNN attention first, then flash "
            "(torchtitan/models/common/attention.py sdpa_backends; since 5cfe514, 2025-03-20; before it PyTorch's "
            "default order put the FlashAttention-2 backend first)",
        ),
        (
            "schedule",
            "parallelism.pipeline_parallel_schedule: GPipe, 1F1B, Interleaved1F1B (torch.distributed."
            "pipelining); zero-bubble only as ZBV/InterleavedZeroBubble, not ZB-H1",
        ),
        (
            "zero",
            "data_parallel_replicate_degree alone is DDP, which 'has not supported > 1D parallelism' (torchtitan "
            "0.2.2 models/llama3/infra/parallelize.py apply_ddp: a RuntimeError beside tp or pp; with cp > 1 FSDP "
            "shards over cp anyway, distributed/parallel_dims.py fsdp_enabled); data_parallel_shard_degree is FSDP2 "
            "fully_shard per block with fsdp_reshard_after_forward always (ZeRO-3) or never (ZeRO-2: the gathered "
            "weights stay until the backward); under PP the schedule keeps the stage's weights and gradients whole "
            "until the last micro-batch (torch.distributed.pipelining stage backward_maybe_with_nosync), which is "
            "ZeRO-1 here; optimizer-only sharding without PP does not exist (FSDP2 reduce-scatters the gradients)",
        ),
        (
            "precision",
            "training.mixed_precision_param bfloat16 | float32 (torchtitan 0.2.2 config/job_config.py Training): no "
            "fp16; FP8 through model.converters quantize.linear.float8",
        ),
        (
            "grad_dtype",
            "training.mixed_precision_reduce is Literal['float32'] (torchtitan 0.2.2 config/job_config.py)",
        ),
        ("cp", "parallelism.context_parallel_degree (ring attention)"),
        (
            "cp_comm",
            "PyTorch context_parallel (torch.distributed.tensor.experimental._attention): the default rotate method "
            "all-gathers the K/V shards once, after the first sub-attention step, under which it runs "
            "(_AllGatherRotater); alltoall passes them shard by shard. Both priced as the ring (p2p), whose hops "
            "hide under the steps; no all-to-all head split",
        ),
        ("mtp", "torchtitan's DeepSeek-V3 model trains without its multi-token prediction module"),
        ("offload_layers", "no activation offloading to host memory in torchtitan's trainer"),
        (
            "fp8_param_gather",
            "quantize.linear.float8.enable_fsdp_float8_all_gather casts the gathered weights to FP8, but the "
            "sharded parameters stay high precision: not Megatron's FP8 primary weights",
        ),
        (
            "precision_aware_optimizer",
            "torch.optim AdamW on FSDP2's fp32 sharded parameters: no master-weight remainders",
        ),
        (
            "expert_gemm",
            "torchtitan/models/moe.py GroupedExperts (use_grouped_mm): one torch._grouped_mm over all local experts",
        ),
        (
            "fp8",
            "model.converters float8: Float8LinearConverter swaps every nn.Linear not in filter_fqns (default empty) "
            "for torchao Float8Linear, the output projection included (torchtitan/components/quantization/float8.py)",
        ),
        ("ep", "parallelism.expert_parallel_degree"),
        (
            "etp",
            "EP borrows ranks from FSDP and TP (efsdp = dp_shard x cp x tp / ep): experts are not tensor-parallel "
            "when ep > 1 (torchtitan/config/configs.py expert_parallel_degree)",
        ),
        ("ep_comm_overlap", "no overlap of one micro-batch's all-to-all with another's compute in the schedules"),
        (
            "ep_dispatch",
            "all-to-all over the EP group; its DeepEP path is an override (torchtitan/overrides/"
            "moe_token_dispatcher.deepep_override) and graph_trainer experiments (moe_comm_backend), not a job-config "
            "key, so not offered (b5bcd76)",
        ),
        (
            "vp",
            "Interleaved1F1B with pipeline_parallel_layers_per_stage, first/last_stage_less_layers, or any module list "
            "per model part (parallelism.module_fqns_per_model_part; torchtitan/distributed/pipeline_parallel.py)",
        ),
        (
            "tp_comm_overlap",
            "parallelism.enable_async_tensor_parallel with compile.enable and 'model' in compile.components "
            "(torchtitan 0.2.2 distributed/tensor_parallel.py maybe_enable_async_tp; symmetric memory, node-local); "
            "hides 45% of what could hide "
            "(TORCHTITAN_ASYNC_TP_SHARE, fitted on the published async TP speedups)",
        ),
        (
            "sp",
            "tensor parallelism always runs the norms sequence-parallel (torchtitan 0.2.2 models/llama3/infra/"
            "parallelize.py apply_tp SequenceParallel; parallelism.enable_sequence_parallel, default true, in later "
            "snapshots)",
        ),
        ("recompute", "activation_checkpoint.mode none|selective|full"),
        (
            "recompute_modules",
            "activation_checkpoint.selective_ac_option is per layer or per op, not Megatron's module list",
        ),
        ("logits", "components/loss.py cross_entropy_loss: F.cross_entropy on pred.float(), unfused"),
        (
            "fp8_recipe",
            "Float8LinearConverter.Config.recipe_name: unset (torchao's tensorwise) through 0.2.2; 'rowwise' default "
            "and tensorwise removed in 6348d93 (2026-04-27); rowwise communicates in bf16 "
            "(torchtitan/components/quantization/float8.py, float8.md)",
        ),
        (
            "fp8_casts",
            "torchao Float8Linear (dynamic tensorwise) casts each GEMM operand in its own kernels: 6 B per input "
            "and 8 B per output-gradient element (costmodel/fp8_casts.py)",
        ),
        (
            "selective_recompute",
            "torchtitan/distributed/activation_checkpoint.py SelectiveAC: per block, save every other mm / linear "
            "output, attention, reduce-scatter and all-to-all results; recompute the rest (costmodel/op_sac.py)",
        ),
        ("overlap_grad_reduce", "FSDP2 reduce-scatter on its own stream"),
        (
            "shard_group",
            "HSDP: parallelism.data_parallel_shard_degree = shard_group, data_parallel_replicate_degree = dp / "
            "shard_group (torchtitan/config/configs.py, distributed/parallel_dims.py: mesh [pp, dp_replicate, "
            "dp_shard, cp, tp]; experts efsdp = dp_shard x cp x tp / ep); FSDP2 all-gathers and reduce-scatters "
            "over the shard mesh dimension and all-reduces the reduce-scatter output over the replicate one after "
            "every backward (PyTorch torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py foreach_reduce)",
        ),
        ("shard_scope", "no secondary weight partition (ZeRO++ hpZ) in FSDP2"),
        ("zero3", "fully_shard per transformer block, the next block's all-gather prefetched"),
        ("pp", "with sequence parallelism a stage's output is sharded over the TP ranks, each sends its shard"),
    ),
)
