"""The TensorRT-LLM exporter: a trtllm-serve launch for one replica, its extra LLM-API options written as a YAML file
by the pasted text itself, at the release the plan names (engine_options.py). Option names are those
export_options.json cites from tensorrt_llm/commands/serve.py and tensorrt_llm/llmapi/llm_args.py."""

from __future__ import annotations

from optimizer.costmodel.serving_engines import TRTLLM_FREE_GPU_MEMORY_FRACTION
from optimizer.errors import DomainError
from optimizer.exports.engine_options import launch_release, priced_knobs
from optimizer.exports.export_record import Export, flags
from optimizer.exports.speculative_flags import trtllm_speculative
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import InferenceWorkload


def heredoc(name: str, text: str) -> str:
    """Shell lines writing `text` to the file `name` verbatim (a quoted here-document: nothing expands)."""
    return f"cat > {name} <<'MESHPLAN_EOF'\n{text}MESHPLAN_EOF\n"


def trtllm_export(w: InferenceWorkload, c: ParallelConfig, model_ref: str, mtp: bool = False) -> Export:
    # Attention data parallelism in TensorRT-LLM lives inside the TP group: tp_size = tp x dp with
    # enable_attention_dp (llm_args; perf-overview's MoE llm_options).
    rel = launch_release("trtllm", w)
    rel.require("trtllm-serve", "engine_version", "a trtllm-serve launch")
    if c.redundant_experts:
        raise DomainError(
            "export.redundant_experts",
            "redundant expert replicas are exported for SGLang and vLLM only (TensorRT-LLM's MoE load balancer "
            "slots are not in the checked option list); export this plan to sglang or vllm",
        )
    knobs = priced_knobs("trtllm", w)
    pairs: list[tuple[str, object | None]] = [
        # The backend the plan priced (trtllm-serve --backend pytorch | tensorrt; tensorrt serves an engine
        # directory built by trtllm-build).
        ("--backend", knobs.trtllm_backend),
        ("--tp_size", c.tp * c.dp),
        ("--pp_size", c.pp),
        ("--max_batch_size", knobs.max_seqs),
        ("--max_seq_len", w.prompt_len + w.output_len),
        ("--kv_cache_free_gpu_memory_fraction", w.memory_fraction or TRTLLM_FREE_GPU_MEMORY_FRACTION),
    ]
    if w.max_batched_tokens:
        pairs.append(("--max_num_tokens", w.max_batched_tokens))
    if c.ep > 1:
        pairs.append(("--ep_size", c.ep))
    names = [n for n, _ in pairs]
    extra, extra_names, notes = _extra_options(w, c, mtp)
    names += extra_names
    if knobs.trtllm_backend == "tensorrt":
        notes.append(f"the plan priced the TensorRT engine backend: {model_ref} is the engine built by trtllm-build")
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


def _extra_options(w: InferenceWorkload, c: ParallelConfig, mtp: bool) -> tuple[list[str], list[str], list[str]]:
    """The extra-options YAML lines, their option names and notes: the KV type, attention DP, and the engine knobs
    the plan priced (TorchLlmArgs: cuda_graph_config null turns graphs off, max_batch_size its largest batch, the
    release's own where it changed it: 128 at v1.0.0; enable_chunked_prefill; speculative_config)."""
    knobs = priced_knobs("trtllm", w)
    extra: list[str] = []
    names: list[str] = []
    if w.kv_cache_dtype == "fp8":
        extra.append("kv_cache_config: {dtype: fp8}")
        names.append("kv_cache_config.dtype")
    if c.dp > 1:
        extra.append("enable_attention_dp: true")
        names.append("enable_attention_dp")
    if w.cuda_graphs is False:
        extra.append("cuda_graph_config: null")
        names.append("cuda_graph_config")
    elif knobs.cuda_graph_max_batch is not None:
        extra.append(f"cuda_graph_config: {{max_batch_size: {knobs.cuda_graph_max_batch}}}")
        names.append("cuda_graph_config.max_batch_size")
    if w.chunked_prefill is not None:
        extra.append(f"enable_chunked_prefill: {'true' if w.chunked_prefill else 'false'}")
        names.append("enable_chunked_prefill")
    spec, spec_names, notes = trtllm_speculative(w, mtp)
    return extra + spec, names + spec_names, notes
