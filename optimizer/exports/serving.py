"""The serving exporters: vLLM, SGLang and TensorRT-LLM launch commands for one replica, and an SLA fleet as one
launch per replica group (with the engines' disaggregated prefill / decode modes and the front end that joins
them)."""

from __future__ import annotations

from optimizer.costmodel.serving_engines import (
    TRTLLM_FREE_GPU_MEMORY_FRACTION,
    VLLM_BLOCK_SIZE,
    VLLM_GPU_MEMORY_UTILIZATION,
    sglang_mem_fraction,
)
from optimizer.errors import DomainError
from optimizer.exports.export_record import Export, flags
from optimizer.search.fleet_result import FleetPlan
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import InferenceWorkload


def vllm_export(w: InferenceWorkload, c: ParallelConfig, layers: list[int], model_ref: str) -> Export:
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
    notes += speculative_note(w, "vllm")
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


def sglang_export(w: InferenceWorkload, c: ParallelConfig, model_ref: str) -> Export:
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
    notes = speculative_note(w, "sglang")
    if c.pp > 1 and len(set(c.layers_per_stage or [])) > 1:
        notes.append(f"SGLang splits layers evenly across pp ranks; the plan's split is {c.layers_per_stage}")
    text, names = flags(pairs)
    return Export(
        tool="sglang", format="args", content=f"python -m sglang.launch_server \\\n  {text}", options=names, notes=notes
    )


def trtllm_export(w: InferenceWorkload, c: ParallelConfig, model_ref: str, max_batch: int | None = None) -> Export:
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
    notes += speculative_note(w, "trtllm")
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


def front_end_export(tool: str, fleet: FleetPlan) -> Export:
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


def speculative_note(w: InferenceWorkload, engine: str) -> list[str]:
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
