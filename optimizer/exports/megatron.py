"""The Megatron-LM exporter: a plan as `pretrain_gpt.py` arguments (the model's shape, the parallel degrees and
layout, the MoE dispatcher and CUDA graphs, the distributed optimizer and recompute, the numerics), option names
as megatron/training/arguments.py spells them; what a flag cannot say goes to the export's notes."""

from __future__ import annotations

from optimizer.exports.export_record import Export, flags
from optimizer.exports.megatron_model import megatron_env, norm_args, position_args, router_args, vocab_args
from optimizer.spec.model_spec import ModelSpec
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.stage_layers import virtual_split
from optimizer.spec.workload import TrainingWorkload


def moe_layer_pattern(model: ModelSpec) -> str:
    """Megatron --moe-layer-freq as a list expression (1 = MoE layer, 0 = dense), run-length encoded: DeepSeek-V3's
    three dense layers then 58 MoE layers give '([0]*3+[1]*58)' [megatron/training/arguments.py moe_freq_type]."""
    runs: list[list[int]] = []
    for i in range(model.num_layers):
        bit = 1 if model.is_moe_layer(i) else 0
        if runs and runs[-1][0] == bit:
            runs[-1][1] += 1
        else:
            runs.append([bit, 1])
    return "(" + "+".join(f"[{bit}]*{n}" for bit, n in runs) + ")"


def megatron_layout(layers: list[int], vp: int, mtp: int = 0) -> str:
    """--pipeline-model-parallel-layout: virtual stages in schedule order (chunk by chunk, rank by rank),
    `E` the embedding on the first, `L` the loss on the last (after `mtp` MTP layers `m`), `t*n` n transformer
    layers, `|` between stages; each rank's layers split over its chunks by stage_layers.virtual_split (the split
    the memory model prices)."""
    pp = len(layers)
    splits = [virtual_split(n, vp) for n in layers]
    segs = []
    for chunk in range(vp):
        for r in range(pp):
            n = splits[r][chunk]
            seg = f"t*{n}" if n > 1 else ("t" if n == 1 else "")
            if chunk == 0 and r == 0:
                seg = "E" + ("," + seg if seg else "")
            if chunk == vp - 1 and r == pp - 1:
                seg = (seg + "," if seg else "") + "m" * mtp + "L"
            segs.append(seg)
    return "|".join(segs)


def _megatron_model_args(model: ModelSpec) -> list[tuple[str, object | None]]:
    """The model's shape as Megatron's arguments: layers, widths, attention (MLA or grouped-query), MoE, MTP."""
    pairs: list[tuple[str, object | None]] = [
        ("--num-layers", model.num_layers),
        ("--hidden-size", model.hidden_size),
        ("--ffn-hidden-size", model.ffn_hidden_size),
        ("--num-attention-heads", model.num_attention_heads),
    ]
    if model.mla is not None:  # MLATransformerConfig fields; the arguments of _add_mla_args
        mla = model.mla
        pairs.append(("--multi-latent-attention", None))
        if mla.q_lora_rank:
            pairs.append(("--q-lora-rank", mla.q_lora_rank))
        pairs += [
            ("--kv-lora-rank", mla.kv_lora_rank),
            ("--qk-head-dim", mla.qk_nope_head_dim),
            ("--qk-pos-emb-head-dim", mla.qk_rope_head_dim),
            ("--v-head-dim", mla.v_head_dim),
        ]
    else:
        if model.kv_heads != model.num_attention_heads:
            pairs += [("--group-query-attention", None), ("--num-query-groups", model.kv_heads)]
        if model.head_dim is not None and model.head_dim * model.num_attention_heads != model.hidden_size:
            pairs.append(("--kv-channels", model.head_dim))
    if not model.tied_embeddings:
        pairs.append(("--untie-embeddings-and-output-weights", None))
    if model.moe is not None:
        pairs += [
            ("--num-experts", model.moe.num_experts),
            ("--moe-router-topk", model.moe.top_k),
            ("--moe-ffn-hidden-size", model.moe.expert_ffn_hidden_size),
        ]
        if model.moe.shared_ffn:
            pairs.append(("--moe-shared-expert-intermediate-size", model.moe.shared_ffn))
        if model.moe.first_k_dense or model.moe.layer_freq > 1:
            pairs.append(("--moe-layer-freq", f'"{moe_layer_pattern(model)}"'))
        if model.moe.num_groups is not None and model.moe.group_topk is not None:  # group-limited routing
            pairs += [
                ("--moe-router-num-groups", model.moe.num_groups),
                ("--moe-router-group-topk", model.moe.group_topk),
            ]
        pairs += router_args(model)
    if model.mtp_layers:
        pairs.append(("--mtp-num-layers", model.mtp_layers))
    return pairs


def _megatron_parallel_args(
    model: ModelSpec, w: TrainingWorkload, c: ParallelConfig, layers: list[int]
) -> list[tuple[str, object | None]]:
    """The sequence, the parallel degrees, the batch, the pipeline layout and the communication overlaps."""
    pairs: list[tuple[str, object | None]] = []
    pairs += [
        ("--seq-length", w.seq_len),
        ("--tensor-model-parallel-size", c.tp),
        ("--pipeline-model-parallel-size", c.pp),
        ("--context-parallel-size", c.cp),
        *([("--cp-comm-type", c.cp_comm)] if c.cp > 1 else []),
        ("--expert-model-parallel-size", c.ep),
        *([("--expert-tensor-parallel-size", c.expert_tp)] if c.etp is not None else []),
        ("--micro-batch-size", c.mbs),
        ("--global-batch-size", w.global_batch_size),
    ]
    even = len(set(layers)) == 1 and layers[0] % c.vp == 0
    if c.pipeline_layout is not None:
        pairs.append(("--pipeline-model-parallel-layout", f'"{c.pipeline_layout}"'))
    elif c.pp > 1 and not even:
        pairs.append(("--pipeline-model-parallel-layout", f'"{megatron_layout(layers, c.vp, model.mtp_layers)}"'))
    elif c.vp > 1:
        pairs.append(("--num-layers-per-virtual-pipeline-stage", layers[0] // c.vp))
    if c.sequence_parallel:
        pairs.append(("--sequence-parallel", None))
    if c.tp_comm_overlap:
        pairs.append(("--tp-comm-overlap", None))
    if c.ep_comm_overlap:
        pairs.append(("--overlap-moe-expert-parallel-comm", None))
    return pairs


def _megatron_runtime_args(
    model: ModelSpec, w: TrainingWorkload, c: ParallelConfig, notes: list[str]
) -> list[tuple[str, object | None]]:
    """The MoE token dispatcher the plan priced and the CUDA graphs (adding to `notes` what a flag cannot say)."""
    pairs: list[tuple[str, object | None]] = []
    # The dispatcher the plan priced; Megatron's own default is the allgather dispatcher (transformer_config.py).
    if model.moe is not None and c.ep > 1:
        if c.ep_dispatch == "deepep":
            pairs += [("--moe-token-dispatcher-type", "flex"), ("--moe-flex-dispatcher-backend", "deepep")]
            notes.append(
                "On multi-node NVLink (GB200 / GB300 NVL72) use --moe-flex-dispatcher-backend hybridep: only "
                "HybridEP supports MNNVL (transformer_config.py moe_flex_dispatcher_backend)"
            )
        else:
            pairs.append(("--moe-token-dispatcher-type", "alltoall"))
    if w.cuda_graphs == "full_iteration":
        pairs.append(("--cuda-graph-impl", "full_iteration"))
        if model.moe is not None:
            notes.append(
                "Full-iteration CUDA graphs of a dropless MoE need static expert shapes: "
                "--moe-expert-capacity-factor with --moe-pad-expert-input-to-capacity (moe/README.md)"
            )
    elif w.cuda_graphs == "layers":
        pairs.append(("--cuda-graph-impl", "transformer_engine"))
        if model.moe is not None:  # dropless MoE layers cannot be captured (moe/README.md, CUDA Graph)
            pairs.append(("--cuda-graph-modules", "attn moe_router moe_preprocess"))
    return pairs


def _megatron_memory_args(c: ParallelConfig, notes: list[str]) -> list[tuple[str, object | None]]:
    """The distributed optimizer (ZeRO), its instances, gradient-reduce overlap, recompute and activation offload."""
    pairs: list[tuple[str, object | None]] = []
    if c.zero_stage == 1:
        pairs += [("--use-distributed-optimizer", None), ("--overlap-param-gather", None)]
    elif c.zero_stage >= 2:
        pairs.append(("--use-distributed-optimizer", None))
        notes.append(
            f"Megatron-LM shards optimizer states only (ZeRO-1); ZeRO-{c.zero_stage} needs Megatron FSDP or DeepSpeed"
        )
    if c.state_replicas > 1:  # the distributed optimizer (or Megatron-FSDP) shards within each instance
        pairs.append(("--num-distributed-optimizer-instances", c.state_replicas))
    if c.overlap_grad_reduce and c.dp * c.cp > 1:
        pairs.append(("--overlap-grad-reduce", None))
    if c.recompute == "full":
        pairs += [("--recompute-granularity", "full"), ("--recompute-method", "uniform"), ("--recompute-num-layers", 1)]
    elif c.recompute == "selective":
        pairs.append(("--recompute-granularity", "selective"))
        if c.recompute_modules is not None:  # TransformerConfig.recompute_modules, nargs '+'
            pairs.append(("--recompute-modules", " ".join(c.recompute_modules)))
    if c.offload_layers:  # > 0 turns cpu_offloading on (arguments.py; cpu_offloading itself has no flag)
        pairs.append(("--cpu-offloading-num-layers", c.offload_layers))
    return pairs


def _megatron_numerics_args(
    w: TrainingWorkload, c: ParallelConfig, notes: list[str]
) -> list[tuple[str, object | None]]:
    """Precision, the precision-aware optimizer and the attention backend (adding the schedule note)."""
    pairs: list[tuple[str, object | None]] = []
    if w.precision == "fp8":
        pairs += [("--bf16", None), ("--fp8-format", "hybrid")]
        if w.fp8_param_gather:
            pairs.append(("--fp8-param-gather", None))
    else:
        pairs.append(("--bf16", None) if w.precision == "bf16" else ("--fp16", None))
    if w.precision_aware_optimizer:
        pairs.append(("--use-precision-aware-optimizer", None))
    # The attention kernel the plan priced, as Megatron's --attention-backend (AttnBackend: flash, fused, unfused,
    # local, auto; megatron/core/transformer/enums.py, d98e8a6): FA3 class = TE FusedAttention (cuDNN), FA2 class =
    # TE FlashAttention (flash-attn), no flash attention = unfused. Unpinned, TE's own choice (auto) is what was
    # priced (frameworks.MEGATRON attention_kernel).
    backend = "unfused" if not w.flash_attention else {"fa3": "fused", "fa2": "flash"}.get(w.attention_kernel or "")
    if backend:
        pairs.append(("--attention-backend", backend))
    if c.schedule in ("zb-h1", "gpipe"):
        notes.append(f"Megatron-LM has no {c.schedule} schedule flag; it runs 1F1B (interleaved when vp > 1)")
    return pairs


def megatron_export(
    model: ModelSpec, w: TrainingWorkload, c: ParallelConfig, layers: list[int], model_ref: str = "MODEL"
) -> Export:
    """The plan as pretrain_gpt.py arguments, the whole model said (megatron_model.py), and the environment
    validate_args requires; `model_ref` names the tokenizer (a Hugging Face id, or a preset's)."""
    notes: list[str] = []
    pairs = _megatron_model_args(model)
    pairs += norm_args(model)
    pairs += position_args(model, w, notes)
    pairs += vocab_args(model, c, model_ref, notes)
    pairs += _megatron_parallel_args(model, w, c, layers)
    pairs += _megatron_runtime_args(model, w, c, notes)
    pairs += _megatron_memory_args(c, notes)
    pairs += _megatron_numerics_args(w, c, notes)
    text, names = flags(pairs)
    return Export(tool="megatron", format="args", content=text, options=names, env=megatron_env(c), notes=notes)
