"""Rules that tie a ParallelConfig to a model, a cluster and a workload. Each raises a DomainError naming the
field and the rule (e.g. "tp=3 does not divide num_attention_heads=64")."""

from __future__ import annotations

from dataclasses import dataclass

from optimizer.errors import DomainError, UnknownNameError
from optimizer.frameworks.capabilities import (
    Framework,
    check_config,
    check_model,
    check_workload,
    framework,
    runs_tp_comm_overlap,
)
from optimizer.spec.cluster_spec import ClusterSpec, NodePool
from optimizer.spec.gpu_catalog import GPUSpec, has_bf16
from optimizer.spec.model_spec import ModelSpec
from optimizer.spec.names import FRAMEWORKS
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.pipeline_layout import parse_layout
from optimizer.spec.recompute_modules import module_rule
from optimizer.spec.stage_layers import LayerRules
from optimizer.spec.workload import InferenceWorkload, TrainingWorkload

# Serving engines pick their own EP backend (SGLang --moe-a2a-backend; vLLM its all-to-all backend setting): not
# a plan knob.
SERVING_EP_DISPATCH_RULE = "ep_dispatch is a training knob (serving engines choose their own EP backend)"


@dataclass(frozen=True, slots=True)
class Layout:
    """A validated configuration's derived layout."""

    stage_pools: tuple[NodePool, ...]
    stage_layers: tuple[int, ...]
    microbatches: int


def _check_recompute_modules(model: ModelSpec, c: ParallelConfig) -> None:
    """Megatron's rules for --recompute-modules [TransformerConfig.__post_init__]."""
    if c.recompute_modules is None:
        return
    if c.recompute != "selective":
        raise DomainError("config.recompute_modules", f"needs recompute=selective (got recompute={c.recompute})")
    for module in c.recompute_modules:
        rule = module_rule(module, model)
        if rule is not None:
            raise DomainError("config.recompute_modules", rule)


def _check_tp(model: ModelSpec, c: ParallelConfig, training: bool) -> None:
    a, kv = model.num_attention_heads, model.kv_heads
    if a % c.tp:
        raise DomainError("config.tp", f"tp={c.tp} does not divide num_attention_heads={a}")
    if model.mla is None and kv % c.tp and (training or c.tp % kv):
        rule = "divide" if training else "divide or be a multiple of"
        raise DomainError("config.tp", f"tp={c.tp} must {rule} num_kv_heads={kv}")
    if c.sequence_parallel and c.tp == 1:
        raise DomainError("config.sequence_parallel", "sequence parallelism needs tp > 1")
    if c.tp_comm_overlap and not c.sequence_parallel:
        raise DomainError("config.tp_comm_overlap", "TP communication overlap needs sequence_parallel")
    if c.ep_comm_overlap:
        if c.ep == 1:
            raise DomainError("config.ep_comm_overlap", "EP communication overlap needs ep > 1")
        if c.recompute == "full":
            raise DomainError("config.ep_comm_overlap", "EP communication overlap cannot run with full recompute")
        if c.pp > 1 and c.vp == 1:
            raise DomainError("config.ep_comm_overlap", "EP communication overlap with pp > 1 needs vp > 1")


def _check_cp_comm(model: ModelSpec, c: ParallelConfig) -> None:
    """Context-parallel communication: a kind other than the ring needs cp > 1; the all-to-all gives each rank
    whole heads (ModelSpec.cp_splits_heads)."""
    if c.cp_comm == "p2p":
        return
    if c.cp == 1:
        raise DomainError("config.cp_comm", f"cp_comm={c.cp_comm} needs cp > 1")
    if c.cp_comm == "a2a" and not model.cp_splits_heads(c.tp, c.cp):
        q, kv = model.heads_per_tp_rank(c.tp)
        raise DomainError(
            "config.cp_comm",
            f"cp_comm=a2a needs cp={c.cp} to divide the heads of a TP rank ({q} query, {kv} KV at tp={c.tp})",
        )


def _check_pipeline(model: ModelSpec, c: ParallelConfig, fw: Framework | None) -> list[int]:
    """Layers per rank (given, or the framework's default split) after the pipeline rules."""
    if c.pp > model.num_layers:
        raise DomainError("config.pp", f"pp={c.pp} exceeds num_layers={model.num_layers}")
    rules = LayerRules.of(model, c.pp, c.vp, fw is not None and fw.virtual_stage_layout)
    if c.pipeline_layout is not None:
        ranks = parse_layout(c.pipeline_layout, c.pp, model.num_layers, model.mtp_layers)
        if len(ranks[0]) != c.vp:
            raise DomainError(
                "config.vp", f"vp={c.vp}, but the layout has {len(ranks[0])} virtual stages per rank over pp={c.pp}"
            )
        if fw is not None and not fw.virtual_stage_layout:
            raise DomainError("config.pipeline_layout", f"{fw.name} takes no custom pipeline layout")
        layers = [sum(chunks) for chunks in ranks]
        if c.layers_per_stage is not None and list(c.layers_per_stage) != layers:
            raise DomainError(
                "config.layers_per_stage", f"{c.layers_per_stage} contradicts the layout's layers per rank {layers}"
            )
    elif c.layers_per_stage is not None:
        layers = list(c.layers_per_stage)
    else:
        default = rules.default_split()
        if default is None:
            raise DomainError(
                "config.layers_per_stage",
                f"pp={c.pp} x vp={c.vp} does not divide num_layers={model.num_layers} evenly and "
                f"{fw.name if fw else 'serving'} takes no custom layout; give layers_per_stage",
            )
        layers = default
    if len(layers) != c.pp:
        raise DomainError("config.layers_per_stage", f"has {len(layers)} entries; pp={c.pp} needs {c.pp}")
    if sum(layers) != model.num_layers:
        raise DomainError("config.layers_per_stage", f"sums to {sum(layers)}; num_layers={model.num_layers}")
    if min(layers) < 1:
        raise DomainError("config.layers_per_stage", "every stage needs at least one layer")
    if c.vp > 1:
        if c.schedule != "interleaved-1f1b":
            raise DomainError("config.vp", f"vp={c.vp} needs schedule interleaved-1f1b (got {c.schedule})")
        if c.pp < 2:
            raise DomainError("config.vp", "virtual stages need pp >= 2")
        if not rules.flexible and any(n % c.vp for n in layers):
            raise DomainError(
                "config.vp",
                f"vp={c.vp} does not divide the layers of every stage ({layers}); "
                f"{fw.name if fw else 'serving'} splits a rank's layers evenly over its virtual stages",
            )
    elif c.schedule == "interleaved-1f1b":
        raise DomainError("config.schedule", "interleaved-1f1b needs vp >= 2")
    return layers


def _check_redundant_experts(model: ModelSpec, c: ParallelConfig, training: bool) -> None:
    """Redundant expert replicas are a serving engines' load-balancer feature over an EP group: SGLang
    (--ep-num-redundant-experts, server_args.py) and vLLM (--num-redundant-experts with --enable-eplb,
    engine/arg_utils.py) build (experts + redundant) / ep experts per rank; Megatron, DeepSpeed and torchtitan
    place each expert once."""
    if not c.redundant_experts:
        return
    if training:
        raise DomainError(
            "config.redundant_experts",
            "redundant expert replicas are a serving engine feature (SGLang, vLLM); training frameworks place each "
            "expert once",
        )
    if model.moe is None:
        raise DomainError("config.redundant_experts", f"needs a mixture-of-experts model ({model.name} is dense)")
    if c.ep == 1:
        raise DomainError("config.redundant_experts", "needs ep > 1: the replicas spread over the EP ranks")


def _check_moe(model: ModelSpec, c: ParallelConfig) -> None:
    if c.etp is not None and model.moe is None and c.etp != c.tp:
        raise DomainError("config.etp", f"etp={c.etp} needs a mixture-of-experts model ({model.name} is dense)")
    if c.ep_dispatch != "alltoall" and c.ep == 1:
        raise DomainError("config.ep_dispatch", f"ep_dispatch={c.ep_dispatch} dispatches over EP ranks: needs ep > 1")
    if c.ep == 1 and c.expert_tp == c.tp:
        return
    if model.moe is None:
        raise DomainError("config.ep", f"ep={c.ep} needs a mixture-of-experts model ({model.name} is dense)")
    slots = c.expert_slots(model.moe.num_experts)
    if slots % c.ep:
        if c.redundant_experts:
            what = f"num_experts={model.moe.num_experts} + redundant_experts={c.redundant_experts} = {slots}"
        else:
            what = f"num_experts={slots} (serving engines can add redundant_experts replicas to make it divide)"
        raise DomainError("config.ep", f"ep={c.ep} does not divide {what}")
    grid = c.tp * c.dp * c.cp
    if grid % (c.ep * c.expert_tp):
        raise DomainError(
            "config.ep",
            f"ep x etp = {c.ep} x {c.expert_tp} must divide tp x dp x cp = {grid} (Megatron carves the expert grid "
            "etp x ep x expert-dp out of each stage's GPUs)",
        )


def check_shard_group(model: ModelSpec, c: ParallelConfig) -> None:
    """A sharding group smaller than the data-parallel group (ParallelConfig.shard_group): whole dp replicas,
    sharding a ZeRO stage's states (scope 'states'), or the ZeRO-3 weights' secondary copy (scope 'weights'); the
    replicas must also split the experts' data-parallel group [MLM parallel_state.py: 'expert_data_parallel_size
    % num_distributed_optimizer_instances == 0'; torchtitan parallel_dims.py: ep divides dp_shard x cp x tp]."""
    s = c.shard_group
    if s is None:
        if c.shard_scope != "states":
            raise DomainError("config.shard_scope", f"shard_scope={c.shard_scope} needs a shard_group")
        return
    if c.dp % s:
        raise DomainError("config.shard_group", f"shard_group={s} must divide dp={c.dp}")
    if c.zero_stage == 0:
        raise DomainError(
            "config.shard_group",
            f"shard_group={s} shards the ZeRO states: needs zero_stage >= 1 (zero_stage=0 replicates them)",
        )
    if c.shard_scope == "weights" and c.zero_stage != 3:
        raise DomainError(
            "config.shard_scope",
            f"shard_scope=weights partitions the ZeRO-3 weights a second time: needs zero_stage 3 (got {c.zero_stage})",
        )
    replicas = c.state_replicas
    if model.moe is not None and c.expert_dp % replicas:
        raise DomainError(
            "config.shard_group",
            f"dp / shard_group = {replicas} state replicas must divide the expert data-parallel group "
            f"(tp x dp x cp / (ep x etp) = {c.expert_dp})",
        )


def serving_config(c: ParallelConfig) -> ParallelConfig:
    """A serving configuration with the engines' defaults where the user left a knob unset: expert parallelism
    spreads whole experts (etp 1) when EP is given without an expert TP degree, as every engine does (vLLM
    --enable-expert-parallel: "EP size = TP x DP", experts not tensor-split, fused_moe/config.py
    FusedMoEParallelConfig.make; SGLang --ep-size with --tp: moe_tp_size = tp / ep, server_args.py; TensorRT-LLM
    --ep_size: moe_tp_size = tp / ep, llmapi/llm_args.py). Megatron's etp default (etp = tp) is a training rule."""
    if c.ep > 1 and c.etp is None:
        return c.model_copy(update={"etp": 1})
    return c


def check_serving_experts(model: ModelSpec, engine: str, c: ParallelConfig) -> None:
    """The expert layouts serving engines run. Without attention data parallelism the experts live inside each
    replica's tp GPUs (tensor-sharded, etp = tp; or whole, ep = tp); with it the dp ranks of a stage share the experts
    over all tp x dp GPUs: whole experts (ep = tp x dp, etp 1: vLLM --enable-expert-parallel sets EP = TP x DP,
    SGLang --ep-size = --tp, TensorRT-LLM --ep = --tp) or tensor-sharded (ep 1, etp = tp x dp: vLLM shards MoE
    weights over DP x TP when EP is off, fused_moe/config.py flatten_tp_across_dp; SGLang's MoE TP over --tp with
    --enable-dp-attention). TensorRT-LLM's attention DP runs attention with TP 1 on every rank (enable_attention_dp:
    attn_tp_size = 1). An EP rank holds whole experts, so ep cannot exceed the routed experts plus their replicas."""
    grid = c.tp * c.dp
    if c.ep > 1 and (c.ep != grid or c.expert_tp != 1):
        raise DomainError(
            "config.ep",
            f"serving expert parallelism spreads whole experts over the stage's tp x dp = {grid} GPUs "
            f"(ep = tp x dp, etp = 1, as vLLM, SGLang and TensorRT-LLM run it); got ep={c.ep}, etp={c.expert_tp}",
        )
    if c.ep == 1 and c.expert_tp not in (c.tp, grid):
        raise DomainError(
            "config.etp",
            f"serving engines shard experts over the attention TP group (etp = tp = {c.tp}) or, under attention "
            f"data parallelism, over all tp x dp = {grid} GPUs; got etp={c.expert_tp}",
        )
    if not c.attention_dp:
        if model.moe is not None and c.ep > model.moe.num_experts + c.redundant_experts:
            raise DomainError(
                "config.ep",
                f"{engine} places whole experts on each EP rank: ep={c.ep} exceeds the "
                f"{model.moe.num_experts + c.redundant_experts} experts of {model.name}",
            )
        return
    if model.moe is None:
        raise DomainError(
            "config.dp",
            f"{engine}: attention data parallelism (experts over tp x dp) shares routed experts across the dp ranks; "
            f"{model.name} is dense (dp replicas keep etp = tp, ep = 1)",
        )
    slots = model.moe.num_experts + c.redundant_experts
    if c.ep > slots:
        raise DomainError(
            "config.ep",
            f"{engine} places whole experts on each EP rank: ep={c.ep} exceeds the {slots} experts "
            f"({model.moe.num_experts} routed + {c.redundant_experts} redundant) of {model.name}",
        )
    if engine == "trtllm" and c.tp > 1:
        raise DomainError(
            "config.tp",
            f"trtllm runs attention data parallelism with attention TP 1 on each rank (enable_attention_dp: "
            f"attn_tp_size = 1); got tp={c.tp} with dp={c.dp}",
        )


def _check_training(model: ModelSpec, w: TrainingWorkload, c: ParallelConfig) -> int:
    if w.global_batch_size % (c.dp * c.mbs):
        raise DomainError(
            "config.mbs",
            f"global batch {w.global_batch_size} is not divisible by dp x mbs = {c.dp} x {c.mbs}",
        )
    m = w.global_batch_size // (c.dp * c.mbs)
    if c.schedule == "interleaved-1f1b" and m % c.pp:
        raise DomainError(
            "config.schedule",
            f"interleaved-1f1b needs micro-batches ({m}) to be a multiple of pp={c.pp}",
        )
    if c.cp > 1 and w.seq_len % (2 * c.cp):
        raise DomainError("config.cp", f"seq_len={w.seq_len} must be divisible by 2 x cp = {2 * c.cp}")
    _check_cp_comm(model, c)
    if c.zero_stage >= 2 and c.pp > 1:
        raise DomainError(
            "config.zero_stage",
            f"ZeRO-{c.zero_stage} cannot be combined with pp={c.pp} (gradients are sharded "
            "per micro-batch; pipeline engines support ZeRO-1 only)",
        )
    return m


def assign_pools(cluster: ClusterSpec, c: ParallelConfig) -> list[NodePool]:
    """The pool of each stage: `stage_pools` when given, else the first pool with room for each stage in turn."""
    need = c.gpus_per_stage
    if c.stage_pools is not None:
        if len(c.stage_pools) != c.pp:
            raise DomainError("config.stage_pools", f"has {len(c.stage_pools)} entries; pp={c.pp} needs {c.pp}")
        pools = []
        for name in c.stage_pools:
            try:
                pools.append(cluster.pool(name))
            except UnknownNameError as exc:
                raise UnknownNameError("config.stage_pools", name, exc.known) from None
    else:
        pools = []
        free = {p.name: p.healthy_gpus for p in cluster.pools}
        for _ in range(c.pp):
            pool = next((p for p in cluster.pools if free[p.name] >= need), None)
            if pool is None:
                raise DomainError(
                    "config",
                    f"{c.gpus} GPUs needed (tp x cp x dp x pp = {c.tp}x{c.cp}x{c.dp}x{c.pp}); "
                    f"the cluster has {cluster.healthy_gpus} healthy GPUs "
                    f"({', '.join(f'{p.name}: {p.healthy_gpus}' for p in cluster.pools)})",
                )
            free[pool.name] -= need
            pools.append(pool)
    used: dict[str, int] = {}
    for pool in pools:
        used[pool.name] = used.get(pool.name, 0) + need
    for name, n in used.items():
        have = cluster.pool(name).healthy_gpus
        if n > have:
            raise DomainError(
                "config.stage_pools", f"pool {name} has {have} healthy GPUs; the stages placed there need {n}"
            )
    return pools


def check_offload(model: ModelSpec, config: ParallelConfig, training: bool) -> None:
    """Activation offloading as Megatron admits it [MLM transformer_config.py __post_init__: 'Currently there is no
    support for Pipeline parallelism with CPU offloading', 'CPU offloading does not work when activation
    recomputation is enabled', 'CPU offloading can be done only for layers less than num_layers']."""
    k = config.offload_layers
    if not k:
        return
    if not training:
        raise DomainError("config.offload_layers", "activation offloading is a training knob")
    if config.pp > 1:
        raise DomainError("config.offload_layers", f"activation offloading needs pp = 1 (got pp={config.pp})")
    if config.recompute != "none":
        raise DomainError(
            "config.offload_layers", f"activation offloading cannot run with recompute={config.recompute}"
        )
    if k >= model.num_layers:
        raise DomainError(
            "config.offload_layers", f"offload_layers={k} must be below the model's {model.num_layers} layers"
        )


def check_fp8_param_gather(workload: TrainingWorkload, config: ParallelConfig) -> None:
    """FP8 primary weights are gathered by the distributed optimizer or FSDP [MLM arguments.py: '--fp8-param-gather
    only supported with distributed optimizer, torch fsdp2, megatron fsdp']."""
    if workload.fp8_param_gather and config.zero_stage == 0:
        raise DomainError(
            "config.zero_stage", "fp8_param_gather needs the distributed optimizer or FSDP (zero_stage >= 1)"
        )


def validate(
    model: ModelSpec,
    cluster: ClusterSpec,
    workload: TrainingWorkload | InferenceWorkload,
    config: ParallelConfig,
) -> Layout:
    """Check every rule; return the layout (pool and layers per stage, micro-batches)."""
    if cluster.healthy_gpus == 0:
        raise DomainError("cluster", f"cluster {cluster.name} has no healthy GPU")
    training = isinstance(workload, TrainingWorkload)
    _check_tp(model, config, training)
    _check_recompute_modules(model, config)
    check_offload(model, config, training)
    fw: Framework | None = None
    if training:
        assert isinstance(workload, TrainingWorkload)
        if workload.framework == "auto":
            raise DomainError(
                "workload.framework",
                f"an estimate needs one framework ({', '.join(FRAMEWORKS)}); auto is for plan",
            )
        fw = framework(workload.framework)
    layers = _check_pipeline(model, config, fw)
    _check_redundant_experts(model, config, training)
    if not training:  # the engines' expert layout first: the training grid rule would name Megatron
        assert isinstance(workload, InferenceWorkload)
        check_serving_experts(model, workload.engine, config)
    _check_moe(model, config)
    if training:
        assert isinstance(workload, TrainingWorkload) and fw is not None
        m = _check_training(model, workload, config)
        check_shard_group(model, config)
        check_config(fw, config)
        check_model(fw, model)
        check_workload(fw, workload)
        check_fp8_param_gather(workload, config)
    else:
        if config.cp > 1:
            raise DomainError("config.cp", "context parallelism is modelled for training only")
        if config.zero_stage:
            raise DomainError("config.zero_stage", "ZeRO applies to training only")
        if config.shard_group is not None or config.shard_scope != "states":
            raise DomainError("config.shard_group", "a sharding group applies to training only")
        if config.ep_dispatch != "alltoall":
            raise DomainError("config.ep_dispatch", SERVING_EP_DISPATCH_RULE)
        m = 1
    pools = assign_pools(cluster, config)
    for pool in {p.name: p for p in pools}.values():
        gpu = cluster.gpu_of(pool)
        unsupported = precision_rule(gpu, workload.precision)
        if unsupported:
            raise DomainError("workload.precision", f"{unsupported} (pool {pool.name})")
        if training and fw is not None and config.tp_comm_overlap and not runs_tp_comm_overlap(fw, gpu):
            raise DomainError(
                "config.tp_comm_overlap",
                f"{fw.name}'s TP-comm overlap runs on Transformer Engine's userbuffers, which need Ampere or newer "
                f"({gpu.name} is {gpu.family}, pool {pool.name})",
            )
    return Layout(stage_pools=tuple(pools), stage_layers=tuple(layers), microbatches=m)


def precision_rule(gpu: GPUSpec, precision: str) -> str | None:
    """Why the GPU cannot compute in `precision`, or None when it can: FP8 needs FP8 tensor cores (Ada, Hopper and
    newer; CDNA 3), BF16 needs BF16 ones (not Volta, gpu_catalog.FP16_ONLY_FAMILIES)."""
    if precision == "fp8" and gpu.fp8_tflops is None:
        return f"fp8 is not supported by {gpu.name}"
    if precision == "bf16" and not has_bf16(gpu):
        return f"bf16 is not supported by {gpu.name} ({gpu.family} has FP16 tensor cores only): use fp16"
    return None
