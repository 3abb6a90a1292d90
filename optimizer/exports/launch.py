"""One plan, exported to the launchers people use: Megatron-LM arguments, a DeepSpeed config, a torchtitan
config, vLLM, SGLang and TensorRT-LLM serve arguments (an SLA fleet: one command per replica group, with the
engines' disaggregated prefill/decode modes). Option names are limited to those each tool documents
(optimizer/exports/export_options.json); what a tool cannot express is said in `notes`."""

from __future__ import annotations

import json

from optimizer.costmodel.result import Estimate
from optimizer.costmodel.serving_engines import (
    TRTLLM_FREE_GPU_MEMORY_FRACTION,
    VLLM_BLOCK_SIZE,
    VLLM_GPU_MEMORY_UTILIZATION,
    sglang_mem_fraction,
)
from optimizer.errors import DomainError, UnknownNameError
from optimizer.exports.export_record import Export, flags
from optimizer.exports.megatron import megatron_export, megatron_layout, moe_layer_pattern
from optimizer.frameworks.capabilities import check_model, check_workload, unsupported_knob
from optimizer.frameworks.capabilities import framework as framework_spec
from optimizer.search.fleet_result import FleetPlan
from optimizer.spec.model_spec import ModelSpec
from optimizer.spec.names import ENGINES, FRAMEWORKS, TOOLS, ToolName, named_framework
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.pipeline_layout import rank_chunks
from optimizer.spec.stage_layers import LayerRules
from optimizer.spec.workload import InferenceWorkload, TrainingWorkload

# Callers import the export record and the Megatron layout helpers from here (their homes: export_record.py,
# megatron.py).
__all__ = [
    "SERVING_TOOLS",
    "TOOLS",
    "TRAINING_TOOLS",
    "Export",
    "export",
    "export_fleet",
    "megatron_layout",
    "moe_layer_pattern",
]

Tool = ToolName
SERVING_TOOLS = ENGINES
TRAINING_TOOLS = FRAMEWORKS


def export(
    tool: str,
    model: ModelSpec,
    workload: TrainingWorkload | InferenceWorkload,
    c: ParallelConfig,
    model_ref: str = "MODEL",
    framework: str | None = None,
    estimate: Estimate | None = None,
) -> Export:
    """Export a planned configuration (layers_per_stage filled) for `tool`. A training plan exports to any
    framework that can run every knob it uses; one it cannot run is an error naming the knob (the plan's own
    `framework`, or the workload's, is named in the message). With the plan's `estimate`, the notes say what the
    run should measure: the predicted step time (TTFT / TPOT) with its 80% interval and basis."""
    out = _export(tool, model, workload, c, model_ref, framework)
    if estimate is not None:
        out.notes.append(prediction_note(estimate))
    return out


def prediction_note(e: Estimate) -> str:
    """What the run should measure, with how sure the prediction is."""
    if e.step_time_interval_s is not None:
        lo, hi = e.step_time_interval_s
        head = f"predicted step time {e.step_time_s:.3g} s (80% interval {lo:.3g}-{hi:.3g} s)"
    elif e.tpot_s is not None and e.tpot_interval_s is not None:
        lo, hi = e.tpot_interval_s
        head = f"predicted TPOT {1000 * e.tpot_s:.3g} ms (80% interval {1000 * lo:.3g}-{1000 * hi:.3g} ms)"
    else:
        head = f"predicted step time {e.step_time_s:.3g} s (no interval)"
    return head + (f"; {e.interval_basis}" if e.interval_basis else "")


def _export(
    tool: str,
    model: ModelSpec,
    workload: TrainingWorkload | InferenceWorkload,
    c: ParallelConfig,
    model_ref: str,
    framework: str | None,
) -> Export:
    if tool not in TOOLS:
        raise UnknownNameError("export", tool, TOOLS)
    if isinstance(workload, TrainingWorkload) and tool in TRAINING_TOOLS:
        planned_for = framework or named_framework(workload.framework)
        check_model(framework_spec(tool), model, "export")
        check_workload(framework_spec(tool), workload, "export")
        bad = unsupported_knob(framework_spec(tool), c)
        if bad is not None:
            knob, text = bad
            origin = f" (the plan was made for {planned_for})" if planned_for and planned_for != tool else ""
            raise DomainError(
                f"export.{knob}", f"{text} is not available in {tool}{origin}; plan again with framework={tool}"
            )
    training = isinstance(workload, TrainingWorkload)
    if training and tool in SERVING_TOOLS:
        raise DomainError(
            "export", f"{tool} is a serving engine; a training plan exports to {', '.join(TRAINING_TOOLS)}"
        )
    if not training and tool in TRAINING_TOOLS:
        raise DomainError(
            "export", f"{tool} is a training framework; a serving plan exports to {', '.join(SERVING_TOOLS)}"
        )
    layers = c.layers_per_stage or _default_layers(model, c, tool)
    if isinstance(workload, TrainingWorkload):
        if tool == "megatron":
            return megatron_export(model, workload, c, layers)
        if tool == "deepspeed":
            return _deepspeed(workload, c, layers)
        return _torchtitan(workload, c, layers)
    if tool == "vllm":
        return _vllm(workload, c, layers, model_ref)
    if tool == "sglang":
        return _sglang(workload, c, model_ref)
    return _trtllm(workload, c, model_ref)


def _default_layers(model: ModelSpec, c: ParallelConfig, tool: str) -> list[int]:
    """Layers per rank of a configuration that gives none: the split `validate` uses for that framework."""
    if tool in TRAINING_TOOLS:
        rules = LayerRules.of(model, c.pp, c.vp, framework_spec(tool).virtual_stage_layout)
        split = rules.default_split()
        if split is not None:
            return split
    return c.stage_layers(model.num_layers)


def _deepspeed(w: TrainingWorkload, c: ParallelConfig, layers: list[int]) -> Export:
    m = w.global_batch_size // (c.dp * c.mbs)
    cfg: dict[str, object] = {
        "train_batch_size": w.global_batch_size,
        "train_micro_batch_size_per_gpu": c.mbs,
        "gradient_accumulation_steps": m,
        "zero_optimization": {
            "stage": c.zero_stage,
            "overlap_comm": c.overlap_grad_reduce,
            "contiguous_gradients": True,
            "reduce_scatter": True,
        },
        "bf16": {"enabled": w.precision in ("bf16", "fp8")},
        "fp16": {"enabled": w.precision == "fp16"},
        "gradient_clipping": 1.0,
    }
    notes = []
    if c.shard_group is not None:  # MiCS (states) or ZeRO++ hpZ (weights), over world ranks (tp = pp = 1)
        zero = cfg["zero_optimization"]
        assert isinstance(zero, dict)
        if c.shard_scope == "weights":
            zero["zero_hpz_partition_size"] = c.shard_group
        else:
            zero["mics_shard_size"] = c.shard_group
            notes.append(
                "MiCS is built with deepspeed.zero.MiCS_Init (not zero.Init) in the model code; when a shard group "
                "spans nodes, zero_optimization.mics_hierarchical_params_gather (inter- then intra-node gathers) may "
                "help, but is not what was priced"
            )
    if c.tp > 1:
        cfg["tensor_parallel"] = {"autotp_size": c.tp}
    if c.recompute != "none":
        cfg["activation_checkpointing"] = {"partition_activations": c.tp > 1, "contiguous_memory_optimization": True}
    if c.pp > 1:
        notes.append(
            f"pipeline stages are set in code: PipelineModule(layers, num_stages={c.pp}, "
            f"partition_method='uniform') or explicit parts with layers per stage {layers}"
        )
    if c.cp > 1 or c.ep > 1:
        notes.append("context/expert parallel degrees are set by the model code (DeepSpeed-Ulysses, DeepSpeed-MoE)")
    if c.schedule != "1f1b" and c.pp > 1:
        notes.append(f"DeepSpeed's pipeline engine runs 1F1B; the plan's {c.schedule} schedule is not available")
    if w.precision == "fp8":
        notes.append("FP8 GEMMs come from Transformer Engine in the model code; DeepSpeed runs bf16 around them")
    return Export(
        tool="deepspeed", format="json", content=json.dumps(cfg, indent=2), options=sorted(_keys(cfg)), notes=notes
    )


def _keys(d: dict[str, object], prefix: str = "") -> set[str]:
    out = set()
    for k, v in d.items():
        name = f"{prefix}{k}"
        out.add(name)
        if isinstance(v, dict):
            out |= _keys(v, name + ".")
    return out


TITAN_SCHEDULES = {
    "1f1b": "1F1B",
    "interleaved-1f1b": "Interleaved1F1B",
    "gpipe": "GPipe",
    "zb-h1": "InterleavedZeroBubble",
}


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(x) for x in value) + "]"
    return str(value)


def _torchtitan(w: TrainingWorkload, c: ParallelConfig, layers: list[int]) -> Export:
    # HSDP with a shard group: FSDP2 over data_parallel_shard_degree ranks, replicated data_parallel_replicate_degree
    # times (torchtitan/config/configs.py ParallelismConfig); without one, FSDP (ZeRO-3) or DDP.
    hsdp = c.shard_group is not None
    replicate = c.state_replicas if hsdp else (c.dp if c.zero_stage < 3 else 1)
    shard = c.shard_group if c.shard_group is not None else (c.dp if c.zero_stage == 3 else 1)
    sections: dict[str, dict[str, object]] = {
        "parallelism": {
            "data_parallel_replicate_degree": replicate,
            "data_parallel_shard_degree": shard,
            "tensor_parallel_degree": c.tp,
            "pipeline_parallel_degree": c.pp,
            "context_parallel_degree": c.cp,
            "expert_parallel_degree": c.ep,
        },
        "training": {
            "local_batch_size": w.global_batch_size // c.dp,
            "global_batch_size": w.global_batch_size,
            "seq_len": w.seq_len,
            "mixed_precision_param": "bfloat16" if w.precision != "fp16" else "float16",
        },
        "activation_checkpoint": {"mode": c.recompute},
    }
    notes = []
    if c.pp > 1:
        par: dict[str, object] = sections["parallelism"]
        par["pipeline_parallel_schedule"] = TITAN_SCHEDULES[c.schedule]
        par["pipeline_parallel_microbatch_size"] = c.mbs
        if len(set(layers)) == 1 and layers[0] % c.vp == 0 and c.pipeline_layout is None:
            par["pipeline_parallel_layers_per_stage"] = layers[0] // c.vp
            par["pipeline_parallel_first_stage_less_layers"] = 0
            par["pipeline_parallel_last_stage_less_layers"] = 0
        else:
            parts = []
            start = 0
            # schedule order: chunk k of every rank, rank by rank
            splits = [rank_chunks(c.pipeline_layout, c.pp, c.vp, r, n) for r, n in enumerate(layers)]
            for k in range(c.vp):
                for r in range(c.pp):
                    per = splits[r][k]
                    names = [f"layers.{i}" for i in range(start, start + per)]
                    if k == 0 and r == 0:
                        names = ["tok_embeddings", *names]
                    if k == c.vp - 1 and r == c.pp - 1:
                        names = [*names, "norm", "output"]
                    parts.append(names)
                    start += per
            par["module_fqns_per_model_part"] = parts
        if c.schedule == "zb-h1":
            notes.append("torchtitan's closest zero-bubble schedule is InterleavedZeroBubble")
    if hsdp and c.zero_stage == 2:  # FSDP2 keeps the gathered weights until the backward: ZeRO-2
        sections["parallelism"]["fsdp_reshard_after_forward"] = "never"
    if c.zero_stage in (1, 2) and not hsdp:
        notes.append(
            f"torchtitan shards with FSDP2 (ZeRO-3) or replicates (DDP); ZeRO-{c.zero_stage} maps to replication here"
        )
    if c.recompute == "selective":
        notes.append("torchtitan's selective mode checkpoints per op; set activation_checkpoint.selective_ac_option")
    lines: list[str] = []
    option_names: list[str] = []
    for sec, body in sections.items():
        lines.append(f"[{sec}]")
        option_names.append(sec)
        for key, value in body.items():
            lines.append(f"{key} = {_toml(value)}")
            option_names.append(f"{sec}.{key}")
        lines.append("")
    return Export(tool="torchtitan", format="toml", content="\n".join(lines), options=option_names, notes=notes)


def _vllm(w: InferenceWorkload, c: ParallelConfig, layers: list[int], model_ref: str) -> Export:
    pairs: list[tuple[str, object | None]] = [
        ("--tensor-parallel-size", c.tp),
        ("--pipeline-parallel-size", c.pp),
        ("--data-parallel-size", c.dp),
        ("--max-num-seqs", w.batch),
        ("--max-model-len", w.prompt_len + w.output_len),
        ("--gpu-memory-utilization", w.memory_fraction or VLLM_GPU_MEMORY_UTILIZATION),
        ("--block-size", VLLM_BLOCK_SIZE),
        ("--dtype", "bfloat16" if w.precision != "fp16" else "float16"),
    ]
    notes = []
    if c.ep > 1:
        pairs.append(("--enable-expert-parallel", None))
        notes.append(f"vLLM sets EP = TP x DP = {c.tp * c.dp} for the MoE layers (plan: ep={c.ep})")
    if c.redundant_experts:  # the replicas need the load balancer that places them [vllm engine/arg_utils.py]
        pairs += [("--enable-eplb", None), ("--num-redundant-experts", c.redundant_experts)]
    if w.precision == "fp8":
        pairs.append(("--quantization", "fp8"))
    if w.kv_cache_dtype == "fp8":
        pairs.append(("--kv-cache-dtype", "fp8"))
    pairs += _vllm_engine_knobs(w)
    notes += _speculative_note(w, "vllm")
    text, names = flags(pairs)
    env = {}
    if c.pp > 1 and len(set(layers)) > 1:
        env["VLLM_PP_LAYER_PARTITION"] = ",".join(str(n) for n in layers)
        names.append("VLLM_PP_LAYER_PARTITION")
    return Export(
        tool="vllm", format="args", content=f"vllm serve {model_ref} \\\n  {text}", options=names, env=env, notes=notes
    )


def _vllm_engine_knobs(w: InferenceWorkload) -> list[tuple[str, object | None]]:
    """vLLM flags for the engine knobs the workload sets (vllm/engine/arg_utils.py: --enforce-eager,
    --enable-chunked-prefill / --no-enable-chunked-prefill, --max-num-batched-tokens; --compilation-config
    max_cudagraph_capture_size, vllm/config/compilation.py)."""
    pairs: list[tuple[str, object | None]] = []
    if w.max_batched_tokens is not None:
        pairs.append(("--max-num-batched-tokens", w.max_batched_tokens))
    if w.chunked_prefill is not None:
        pairs.append(("--enable-chunked-prefill" if w.chunked_prefill else "--no-enable-chunked-prefill", None))
    if w.cuda_graphs is False:
        pairs.append(("--enforce-eager", None))
    elif w.cuda_graph_max_batch is not None:
        pairs.append(("--compilation-config", f"'{{\"max_cudagraph_capture_size\": {w.cuda_graph_max_batch}}}'"))
    return pairs


def _sglang_engine_knobs(w: InferenceWorkload) -> list[tuple[str, object | None]]:
    """SGLang flags for the engine knobs the workload sets (python/sglang/srt/server_args.py: --chunked-prefill-size,
    -1 disables chunking; --disable-cuda-graph; --cuda-graph-max-bs)."""
    pairs: list[tuple[str, object | None]] = []
    if w.chunked_prefill is False:
        pairs.append(("--chunked-prefill-size", -1))
    elif w.max_batched_tokens is not None:
        pairs.append(("--chunked-prefill-size", w.max_batched_tokens))
    if w.cuda_graphs is False:
        pairs.append(("--disable-cuda-graph", None))
    elif w.cuda_graph_max_batch is not None:
        pairs.append(("--cuda-graph-max-bs", w.cuda_graph_max_batch))
    return pairs


def _sglang(w: InferenceWorkload, c: ParallelConfig, model_ref: str) -> Export:
    # Under --enable-dp-attention SGLang's --tp-size is every GPU of the replica and the attention runs with
    # tp / dp of them ("assert self.tp_size % self.dp_size == 0", srt/server_args.py); the MoE is TP over all of
    # them, or EP with --ep-size.
    adp = c.attention_dp
    pairs: list[tuple[str, object | None]] = [
        ("--model-path", model_ref),
        ("--tp-size", c.tp * c.dp if adp else c.tp),
        ("--pp-size", c.pp),
        ("--dp-size", c.dp),
        ("--max-running-requests", w.batch),
        ("--context-length", w.prompt_len + w.output_len),
        # The fraction the plan was priced with (the engine's default by TP when unset), so the engine admits the
        # sequences the plan assumed [issue 50 §3].
        ("--mem-fraction-static", w.memory_fraction or sglang_mem_fraction(c.tp)),
        ("--dtype", "bfloat16" if w.precision != "fp16" else "float16"),
    ]
    if c.ep > 1:
        pairs.append(("--ep-size", c.ep))
    if adp:
        pairs.append(("--enable-dp-attention", None))
    if c.ep_comm_overlap:
        pairs.append(("--enable-two-batch-overlap", None))
    if c.redundant_experts:  # EPLB decides which experts the replicas copy [sglang srt/server_args.py]
        pairs += [("--ep-num-redundant-experts", c.redundant_experts), ("--enable-eplb", None)]
    if w.precision == "fp8":
        pairs.append(("--quantization", "fp8"))
    if w.kv_cache_dtype == "fp8":
        pairs.append(("--kv-cache-dtype", "fp8_e4m3"))
    pairs += _sglang_engine_knobs(w)
    notes = _speculative_note(w, "sglang")
    if c.pp > 1 and len(set(c.layers_per_stage or [])) > 1:
        notes.append(f"SGLang splits layers evenly across pp ranks; the plan's split is {c.layers_per_stage}")
    text, names = flags(pairs)
    return Export(
        tool="sglang", format="args", content=f"python -m sglang.launch_server \\\n  {text}", options=names, notes=notes
    )


def _trtllm(w: InferenceWorkload, c: ParallelConfig, model_ref: str, max_batch: int | None = None) -> Export:
    # Attention data parallelism in TensorRT-LLM lives inside the TP group: tp_size = tp x dp with
    # enable_attention_dp (llm_args; perf-overview's MoE llm_options).
    if c.redundant_experts:
        raise DomainError(
            "export.redundant_experts",
            "redundant expert replicas are exported for SGLang and vLLM only (TensorRT-LLM's MoE load balancer "
            "slots are not in the checked option list); export this plan to sglang or vllm",
        )
    pairs: list[tuple[str, object | None]] = [
        ("--backend", "pytorch"),
        ("--tp_size", c.tp * c.dp),
        ("--pp_size", c.pp),
        ("--max_batch_size", max_batch or w.max_seqs or w.batch),
        ("--max_seq_len", w.prompt_len + w.output_len),
        ("--kv_cache_free_gpu_memory_fraction", w.memory_fraction or TRTLLM_FREE_GPU_MEMORY_FRACTION),
    ]
    if w.max_batched_tokens:
        pairs.append(("--max_num_tokens", w.max_batched_tokens))
    if c.ep > 1:
        pairs.append(("--ep_size", c.ep))
    names = [n for n, _ in pairs]
    notes = []
    extra = []
    if w.kv_cache_dtype == "fp8":
        extra.append("kv_cache_config: {dtype: fp8}")
        names.append("kv_cache_config.dtype")
    if c.dp > 1:
        extra.append("enable_attention_dp: true")
        names.append("enable_attention_dp")
    # The engine knobs the plan was priced with, when set (TorchLlmArgs: cuda_graph_config null turns graphs off;
    # enable_chunked_prefill).
    if w.cuda_graphs is False:
        extra.append("cuda_graph_config: null")
        names.append("cuda_graph_config")
    elif w.cuda_graph_max_batch is not None:
        extra.append(f"cuda_graph_config: {{max_batch_size: {w.cuda_graph_max_batch}}}")
        names.append("cuda_graph_config.max_batch_size")
    if w.chunked_prefill is not None:
        extra.append(f"enable_chunked_prefill: {'true' if w.chunked_prefill else 'false'}")
        names.append("enable_chunked_prefill")
    notes += _speculative_note(w, "trtllm")
    if w.trtllm_backend == "tensorrt":
        notes.append(
            "the plan priced the TensorRT engine backend: build the engine (trtllm-build) and serve it; this "
            "command runs the PyTorch backend"
        )
    if extra:
        pairs.append(("--extra_llm_api_options", "extra.yml"))
        names.append("--extra_llm_api_options")
    if w.precision == "fp8":
        notes.append("serve an FP8 checkpoint (ModelOpt); trtllm-serve reads the quantization from it")
    text, _ = flags(pairs)
    # The options file is written first, so the pasted text runs as it stands.
    files = heredoc("extra.yml", "\n".join(extra) + "\n") if extra else ""
    return Export(
        tool="trtllm",
        format="args",
        content=f"{files}trtllm-serve {model_ref} \\\n  {text}",
        options=names,
        notes=notes,
    )


def heredoc(name: str, text: str) -> str:
    """Shell lines writing `text` to the file `name` verbatim (a quoted here-document: nothing expands)."""
    return f"cat > {name} <<'MESHPLAN_EOF'\n{text}MESHPLAN_EOF\n"


def export_fleet(
    tool: str, model: ModelSpec, w: InferenceWorkload, fleet: FleetPlan, model_ref: str = "MODEL"
) -> list[Export]:
    """One launch per replica group of an SLA fleet, with the engine's limits set to the plan's; a
    disaggregated fleet adds the engine's prefill/decode roles and how the front end joins them."""
    if tool not in SERVING_TOOLS:
        raise DomainError("export", f"an SLA fleet exports to {', '.join(SERVING_TOOLS)} (got {tool!r})")
    out: list[Export] = []
    for g in fleet.groups:
        s = g.shape
        c = ParallelConfig(tp=s.tp, pp=s.pp, dp=s.dp, ep=s.ep, etp=1 if s.ep > 1 else None, ep_comm_overlap=s.overlap)
        wg = w.model_copy(
            update={
                "batch": s.max_seqs,
                "max_batched_tokens": s.max_batched_tokens,
                "memory_fraction": s.memory_fraction,
            }
        )
        exp = export(tool, model, wg, c, model_ref)
        extra: list[tuple[str, object | None]] = []
        # The group's token budget is in wg: the engine export writes it (--max-num-batched-tokens,
        # --chunked-prefill-size, --max_num_tokens).
        if tool == "vllm" and s.role != "replica":
            extra.append(("--kv-transfer-config", '\'{"kv_connector":"NixlConnector","kv_role":"kv_both"}\''))
        if tool == "sglang" and s.role != "replica":
            extra += [("--disaggregation-mode", s.role), ("--disaggregation-transfer-backend", "mooncake")]
        text, names = flags(extra)
        content = exp.content + (" \\\n  " + text if extra else "")
        notes = [f"{g.count} x {s.role} on pool {s.pool} ({s.gpu}), {s.gpus} GPUs each", *exp.notes]
        out.append(exp.model_copy(update={"content": content, "options": exp.options + names, "notes": notes}))
    if fleet.mode == "disaggregated":
        out.append(_front_end(tool, fleet))
    return out


def _front_end(tool: str, fleet: FleetPlan) -> Export:
    """How requests reach a disaggregated fleet: the engine's router / proxy over the prefill and decode URLs."""
    pre = sum(g.count for g in fleet.groups if g.shape.role == "prefill")
    dec = sum(g.count for g in fleet.groups if g.shape.role == "decode")
    if tool == "sglang":
        args = " ".join(
            ["--prefill http://PREFILL_i:30000"] * min(pre, 2) + ["--decode http://DECODE_j:30000"] * min(dec, 2)
        )
        return Export(
            tool="sglang",
            format="args",
            content=f"python -m sglang_router.launch_router --pd-disaggregation {args}",
            options=["sglang_router.launch_router --pd-disaggregation", "--prefill", "--decode"],
            notes=[f"list all {pre} prefill and {dec} decode servers"],
        )
    if tool == "trtllm":
        first = next(g.shape for g in fleet.groups if g.shape.role == "prefill")
        second = next(g.shape for g in fleet.groups if g.shape.role == "decode")
        yaml = (
            f"context_servers:\n  num_instances: {pre}\n  tensor_parallel_size: {first.tp}\n"
            f"  pipeline_parallel_size: {first.pp}\n  urls: [PREFILL_URLS]\n"
            f"generation_servers:\n  num_instances: {dec}\n  tensor_parallel_size: {second.tp}\n"
            f"  pipeline_parallel_size: {second.pp}\n  urls: [DECODE_URLS]\n"
        )
        keys = ["num_instances", "tensor_parallel_size", "pipeline_parallel_size", "urls"]
        return Export(
            tool="trtllm",
            format="args",
            content=heredoc("disagg.yml", yaml) + "trtllm-serve disaggregated -c disagg.yml",
            options=["disaggregated", "-c"]
            + [f"{s}.{k}" for s in ("context_servers", "generation_servers") for k in keys],
        )
    return Export(
        tool="vllm",
        format="args",
        content="# vLLM: a proxy sends each request to a prefill instance, then to a decode instance "
        "(examples/online_serving/disaggregated_serving); the NixlConnector moves the KV cache between them",
        options=[],
        notes=[f"{pre} prefill and {dec} decode instances behind the proxy"],
    )


def _speculative_note(w: InferenceWorkload, engine: str) -> list[str]:
    """The speculative decoding the plan was priced with, in the engine's own options (costmodel/speculative.py
    names them); a note, since the drafter (MTP head or EAGLE checkpoint) is the user's choice."""
    if not w.spec_tokens:
        return []
    k = w.spec_tokens
    how = {
        "vllm": f'--speculative-config \'{{"method": "deepseek_mtp", "num_speculative_tokens": {k}}}\' (or an '
        "EAGLE drafter)",
        "sglang": f"--speculative-algorithm EAGLE --speculative-num-steps {k} --speculative-eagle-topk 1 "
        f"--speculative-num-draft-tokens {k + 1}",
        "trtllm": f"speculative_config: {{decoding_type: MTP, num_nextn_predict_layers: {k}}}",
    }[engine]
    return [
        f"the plan priced speculative decoding with {k} draft token(s) at acceptance {w.acceptance_rate:g}: "
        f"launch with {how}"
    ]
