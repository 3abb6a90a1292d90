"""The serving exporters: vLLM and SGLang launch commands for one replica (TensorRT-LLM: trtllm.py), and the front
end that joins a disaggregated fleet's prefill and decode instances (launch.export_fleet writes one launch per
replica group). Each launch is written for the engine release the plan names (engine_options.py) and sets what the
plan priced: the sequence limit, token budget, memory share, parallel sizes, KV type, chunked prefill, CUDA graphs
and speculative decoding."""

from __future__ import annotations

from optimizer.costmodel.serving_engines import (
    SGLANG_CHUNKED_PREFILL_SIZE,
    VLLM_BLOCK_SIZE,
    VLLM_GPU_MEMORY_UTILIZATION,
    sglang_mem_fraction,
)
from optimizer.exports.engine_options import LaunchRelease, launch_release, priced_knobs, vllm_capture_sizes
from optimizer.exports.export_record import Export, flags
from optimizer.exports.speculative_flags import sglang_speculative, speculative_note, vllm_speculative
from optimizer.exports.trtllm import heredoc, trtllm_export
from optimizer.search.fleet_result import FleetPlan
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import InferenceWorkload

__all__ = ["front_end_export", "heredoc", "sglang_export", "speculative_note", "trtllm_export", "vllm_export"]

Pairs = list[tuple[str, object | None]]


def vllm_export(
    w: InferenceWorkload, c: ParallelConfig, layers: list[int], model_ref: str, mtp: bool = False
) -> Export:
    rel = launch_release("vllm", w)
    knobs = priced_knobs("vllm", w)
    pairs: Pairs = [
        ("--tensor-parallel-size", c.tp),
        ("--pipeline-parallel-size", c.pp),
    ]
    if c.dp > 1 or rel.has("--data-parallel-size"):
        rel.require("--data-parallel-size", "dp", f"data parallel {c.dp}")
        pairs.append(("--data-parallel-size", c.dp))
    pairs += [
        # max_num_seqs is per data-parallel rank (each DP engine core schedules its own, vllm/v1/engine/core.py).
        ("--max-num-seqs", knobs.max_seqs),
        ("--max-model-len", w.prompt_len + w.output_len),
        ("--gpu-memory-utilization", w.memory_fraction or VLLM_GPU_MEMORY_UTILIZATION),
        ("--block-size", VLLM_BLOCK_SIZE),
        ("--dtype", "bfloat16" if w.precision != "fp16" else "float16"),
    ]
    notes = []
    if c.ep > 1:
        rel.require("--enable-expert-parallel", "ep", f"expert parallel {c.ep}")
        pairs.append(("--enable-expert-parallel", None))
        notes.append(f"vLLM sets EP = TP x DP = {c.tp * c.dp} for the MoE layers (plan: ep={c.ep})")
    pairs += _vllm_eplb(rel, c)
    if w.precision == "fp8":
        pairs.append(("--quantization", "fp8"))
    if w.kv_cache_dtype == "fp8":
        pairs.append(("--kv-cache-dtype", "fp8"))
    pairs += _vllm_engine_knobs(w, rel)
    spec, spec_notes = vllm_speculative(w, rel, mtp)
    pairs += spec
    notes += spec_notes
    text, names = flags(pairs)
    env = {}
    if c.pp > 1 and len(set(layers)) > 1:
        env["VLLM_PP_LAYER_PARTITION"] = ",".join(str(n) for n in layers)
        names.append("VLLM_PP_LAYER_PARTITION")
    return Export(
        tool="vllm", format="args", content=f"vllm serve {model_ref} \\\n  {text}", options=names, env=env, notes=notes
    )


def _vllm_eplb(rel: LaunchRelease, c: ParallelConfig) -> Pairs:
    """Redundant expert replicas need the load balancer that places them: --enable-eplb with their count in
    --eplb-config (vllm engine/arg_utils.py at v0.11.0, where --num-redundant-experts is deprecated: "will be
    removed in v0.12.0")."""
    if not c.redundant_experts:
        return []
    rel.require("--enable-eplb", "redundant_experts", f"{c.redundant_experts} redundant experts")
    return [("--enable-eplb", None), ("--eplb-config", f"'{{\"num_redundant_experts\": {c.redundant_experts}}}'")]


def _vllm_engine_knobs(w: InferenceWorkload, rel: LaunchRelease) -> Pairs:
    """vLLM flags for the engine knobs the plan priced (vllm/engine/arg_utils.py: --max-num-batched-tokens,
    --enable-chunked-prefill / --no-enable-chunked-prefill (a StoreBoolean taking true / false before v0.9),
    --enforce-eager; --compilation-config cudagraph_capture_sizes, vllm/config/compilation.py, read by every V1
    release: max_cudagraph_capture_size does not exist at v0.11.0, whose CompilationConfig ignores unknown keys)."""
    knobs = priced_knobs("vllm", w)
    pairs: Pairs = []
    if w.max_batched_tokens is not None:
        pairs.append(("--max-num-batched-tokens", w.max_batched_tokens))
    chunked = knobs.chunked_prefill
    if chunked is None and knobs.mixes_prefill is False:
        # The release priced the V0 scheduler, which mixes no prefill into decodes: chunked prefill off, as V0 runs
        # below 32K context and not above (vllm/engine/arg_utils.py at v0.6.0 turns it on past 32K).
        chunked = False
    if chunked is not None:
        if rel.has("--no-enable-chunked-prefill"):
            pairs.append(("--enable-chunked-prefill" if chunked else "--no-enable-chunked-prefill", None))
        else:
            pairs.append(("--enable-chunked-prefill", "true" if chunked else "false"))
    if w.cuda_graphs is False:
        pairs.append(("--enforce-eager", None))
    elif knobs.cuda_graph_max_batch is not None and not knobs.release_graph_default:
        rel.require("--compilation-config", "cuda_graph_max_batch", f"CUDA graphs up to {knobs.cuda_graph_max_batch}")
        sizes = ", ".join(str(n) for n in vllm_capture_sizes(knobs.cuda_graph_max_batch))
        pairs.append(("--compilation-config", f"'{{\"cudagraph_capture_sizes\": [{sizes}]}}'"))
    return pairs


def _sglang_engine_knobs(w: InferenceWorkload, c: ParallelConfig, rel: LaunchRelease) -> Pairs:
    """SGLang flags for the engine knobs the plan priced (python/sglang/srt/server_args.py: --chunked-prefill-size,
    -1 disables chunking, divided by dp_size under --enable-dp-attention (_handle_data_parallelism at v0.5.3), so
    the per-rank budget is written times dp; --disable-cuda-graph; --cuda-graph-max-bs)."""
    knobs = priced_knobs("sglang", w)
    ranks = c.dp if c.attention_dp else 1
    pairs: Pairs = []
    if w.chunked_prefill is False:
        pairs.append(("--chunked-prefill-size", -1))
    elif w.max_batched_tokens is not None or ranks > 1:
        # Unset under dp attention: the engine's default budget per rank as priced (SGLANG_CHUNKED_PREFILL_SIZE),
        # which SGLang would otherwise split across the ranks.
        budget = w.max_batched_tokens or SGLANG_CHUNKED_PREFILL_SIZE
        pairs.append(("--chunked-prefill-size", budget * ranks))
    if w.cuda_graphs is False:
        pairs.append(("--disable-cuda-graph", None))
    elif knobs.cuda_graph_max_batch is not None:
        if knobs.release_graph_default and not rel.has("--cuda-graph-max-bs"):
            return pairs  # the release's own fixed capture limit (v0.3.0: 160), as priced
        rel.require("--cuda-graph-max-bs", "cuda_graph_max_batch", f"CUDA graphs up to {knobs.cuda_graph_max_batch}")
        pairs.append(("--cuda-graph-max-bs", knobs.cuda_graph_max_batch))
    return pairs


def sglang_export(w: InferenceWorkload, c: ParallelConfig, model_ref: str, mtp: bool = False) -> Export:
    # Under --enable-dp-attention SGLang's --tp-size is every GPU of the replica and the attention runs with
    # tp / dp of them ("assert self.tp_size % self.dp_size == 0", srt/server_args.py); the MoE is TP over all of
    # them, or EP with --ep-size.
    rel = launch_release("sglang", w)
    adp = c.attention_dp
    # --max-running-requests is the replica's: each dp-attention rank takes it divided by dp_size
    # (python/sglang/srt/managers/tp_worker.py at v0.5.3), so the per-rank limit the plan priced is written times dp.
    ranks = c.dp if adp else 1
    pairs: Pairs = [("--model-path", model_ref), ("--tp-size", c.tp * c.dp if adp else c.tp)]
    if c.pp > 1 or rel.has("--pp-size"):
        rel.require("--pp-size", "pp", f"pipeline parallel {c.pp}")
        pairs.append(("--pp-size", c.pp))
    pairs += [
        ("--dp-size", c.dp),
        ("--max-running-requests", priced_knobs("sglang", w).max_seqs * ranks),
        ("--context-length", w.prompt_len + w.output_len),
        # The fraction the plan was priced with (the engine's default by TP when unset), so the engine admits the
        # sequences the plan assumed [issue 50 §3].
        ("--mem-fraction-static", w.memory_fraction or sglang_mem_fraction(c.tp)),
        ("--dtype", "bfloat16" if w.precision != "fp16" else "float16"),
    ]
    if c.ep > 1:
        rel.require("--ep-size", "ep", f"expert parallel {c.ep}")
        pairs.append(("--ep-size", c.ep))
    if adp:
        rel.require("--enable-dp-attention", "dp", f"attention data parallel {c.dp}")
        pairs.append(("--enable-dp-attention", None))
    if c.ep_comm_overlap:
        rel.require("--enable-two-batch-overlap", "ep_comm_overlap", "two-batch overlap")
        pairs.append(("--enable-two-batch-overlap", None))
    if c.redundant_experts:  # EPLB decides which experts the replicas copy [sglang srt/server_args.py]
        rel.require("--enable-eplb", "redundant_experts", f"{c.redundant_experts} redundant experts")
        pairs += [("--ep-num-redundant-experts", c.redundant_experts), ("--enable-eplb", None)]
    if w.precision == "fp8":
        pairs.append(("--quantization", "fp8"))
    if w.kv_cache_dtype == "fp8":
        # FP8 E4M3 where the release has it; v0.3.0's only FP8 KV type is E5M2 (server_args.py choices).
        pairs.append(("--kv-cache-dtype", "fp8_e4m3" if rel.has("fp8_e4m3") else "fp8_e5m2"))
    pairs += _sglang_engine_knobs(w, c, rel)
    spec, notes = sglang_speculative(w, rel, mtp)
    pairs += spec
    if c.pp > 1 and len(set(c.layers_per_stage or [])) > 1:
        notes.append(f"SGLang splits layers evenly across pp ranks; the plan's split is {c.layers_per_stage}")
    text, names = flags(pairs)
    return Export(
        tool="sglang", format="args", content=f"python -m sglang.launch_server \\\n  {text}", options=names, notes=notes
    )


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
