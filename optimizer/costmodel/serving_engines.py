"""What each serving engine does by default that decides a replica's capacity: how much memory the KV cache gets,
in which units, how many sequences and tokens one iteration may carry, and how a request's KV is reserved.

Read from the engines' own code (the version is named on each entry); a user's explicit setting in the workload
(`max_seqs`, `max_batched_tokens`, `memory_fraction`) replaces the default.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from optimizer.costmodel.constants import ENGINE_ITERATION_OVERHEAD_S, TRTLLM_TENSORRT_ITERATION_OVERHEAD_S
from optimizer.costmodel.engine_releases import match_release
from optimizer.spec.gpu_catalog import GPUSpec
from optimizer.spec.names import ENGINES, EngineName
from optimizer.spec.workload import InferenceWorkload

__all__ = ["ENGINES", "EngineName"]
GIB = 1024**3


@dataclass(frozen=True)
class EngineLimits:
    """One replica's scheduling limits under an engine."""

    engine: EngineName
    memory_fraction: float
    """Share of memory the engine may use; of the whole device (vllm, sglang) or of what is free after the weights
    (trtllm)."""
    fraction_of_free: bool
    """True when memory_fraction applies to the memory left after weights and activations (trtllm)."""
    block_tokens: int
    """Tokens per KV-cache block (page); capacity is counted in whole blocks."""
    max_seqs: int
    """Most sequences one iteration runs (vllm max_num_seqs, sglang max_running_requests, trtllm max_batch_size)."""
    max_batched_tokens: int
    """Token budget of one iteration: decode tokens plus the prefill chunk."""
    reserves_whole_request: bool
    """The scheduler reserves KV for prompt + every output token at admission (trtllm GUARANTEED_NO_EVICT);
    otherwise blocks are taken as tokens arrive (vllm, sglang), so a running sequence holds prompt + half its
    output on average."""
    flag_names: dict[str, str]
    """The engine's own option names for the settings above, for exports."""
    mixes_prefill: bool = True
    """Prefill chunks run in the same iteration as the decodes (vLLM V1, TensorRT-LLM in-flight batching); SGLang
    runs separate prefill batches unless --enable-mixed-chunk (server_args.py: enable_mixed_chunk False)."""
    host_s: float = 0.0
    """Host time per iteration the GPU waits for (scheduling, input preparation, sampling), seconds: the same on
    every path that prices a step (fixed batch, request rate, SLA search)."""
    graph_max_batch: int = 0
    """Largest decode batch per rank replayed from a captured CUDA graph; larger batches (and every batch when
    0: graphs off) launch their kernels one by one."""
    chunked_prefill: bool = True
    """Long prompts are split into chunks of the token budget; off: a prompt's whole prefill runs in one iteration
    (the budget then only bounds how many prompts an iteration takes)."""

    def decode_graphs(self, seqs_per_rank: float) -> bool:
        """Whether a decode iteration of `seqs_per_rank` sequences on each rank replays a CUDA graph. An iteration
        without decodes (a prefill alone) launches its kernels: the engines capture decode batches only (TensorRT-LLM
        CudaGraphConfig: "enabled for batches that consist of decoding requests *only*"; SGLang's extend batches and
        vLLM V0's prefills run eagerly)."""
        return 0 < math.ceil(seqs_per_rank - 1e-9) <= self.graph_max_batch


# ---- engine defaults (each from the engine's own code, version named) ----------------------------------------
# vLLM vllm/engine/arg_utils.py get_batch_defaults (v0.9-v0.11, `vllm serve`): GPUs of >= 70 GiB other than A100
# get the larger batch defaults; CacheConfig gpu_memory_utilization and block_size.
VLLM_LARGE_GPU_BYTES = 70 * GIB
VLLM_MAX_NUM_SEQS_LARGE, VLLM_MAX_NUM_SEQS = 1024, 256
VLLM_MAX_NUM_BATCHED_TOKENS_LARGE, VLLM_MAX_NUM_BATCHED_TOKENS = 8192, 2048
VLLM_GPU_MEMORY_UTILIZATION = 0.9
VLLM_BLOCK_SIZE = 16
# SGLang python/sglang/srt/server_args.py (v0.4.x): mem_fraction_static by TP size (the first entry whose tp the
# replica reaches, the last for any), page_size, chunked_prefill_size (smaller under 25 GB), and the req_to_token
# pool's cuda-graph-free default that bounds max_running_requests.
SGLANG_MEM_FRACTION_BY_TP: tuple[tuple[int, float], ...] = ((8, 0.81), (4, 0.85), (2, 0.87), (1, 0.88))
SGLANG_PAGE_SIZE = 1
SGLANG_MAX_RUNNING_REQUESTS = 4096
SGLANG_SMALL_GPU_BYTES = 25e9
SGLANG_CHUNKED_PREFILL_SIZE, SGLANG_CHUNKED_PREFILL_SIZE_SMALL = 8192, 2048
# SGLang wide EP (DP attention over DeepEP) decodes at most 256 sequences per rank (LMSYS large-scale EP blog,
# decode table: batch size 256 per device).
SGLANG_WIDE_EP_MAX_SEQS = 256
# TensorRT-LLM (PyTorch backend, v0.20-v1.0) llm_args: max_batch_size, max_num_tokens
# [docs/source/performance/tuning-max-batch-size-and-max-num-tokens.md]; KvCacheConfig free_gpu_memory_fraction
# [perf-overview.md]; tokens_per_block.
TRTLLM_MAX_BATCH_SIZE = 2048
TRTLLM_MAX_NUM_TOKENS = 8192
TRTLLM_FREE_GPU_MEMORY_FRACTION = 0.9
TRTLLM_TOKENS_PER_BLOCK = 32

# ---- CUDA graph capture limits (the largest decode batch replayed from a graph), from the engines' code ----------
# vLLM vllm/config/vllm.py VllmConfig._set_cudagraph_sizes (vllm-project/vllm 09f030eaf851400a83ad3d99f730868f76df0ca7):
# max_cudagraph_capture_size = min(max_num_seqs * 2, 512), then min(max_num_batched_tokens, that); a batch above the
# largest capture size runs without a graph.
VLLM_CUDAGRAPH_CAPTURE_CAP = 512
# SGLang python/sglang/srt/server_args.py (sgl-project/sglang 469c63e54e7d94591617ef9590c6aa26d54dc1bb),
# cuda_graph_max_bs by the GPU's memory (MiB) and TP size: < 35 GiB 24 (tp < 4) / 80; < 60 GiB (A100 40GB, L40)
# 32 / 160; < 160 GiB (H100, A100 80GB, H200) 256 / 512; larger (B200, MI300X) 512. Older releases (v0.3-v0.4:
# 160, 8 under 25 GB) are set per record (`cuda_graph_max_batch`).
SGLANG_CUDA_GRAPH_MAX_BS: tuple[tuple[float, int, int], ...] = (
    (35 * GIB, 24, 80),
    (60 * GIB, 32, 160),
    (160 * GIB, 256, 512),
    (math.inf, 512, 512),
)
# TensorRT-LLM PyTorch backend tensorrt_llm/llmapi/llm_args.py CudaGraphConfig.validate_cuda_graph_config: neither
# batch_sizes nor max_batch_size given, "a default max_batch_size of 128 is used"; graphs replay decode-only
# iterations. The TensorRT engine backend enqueues the whole built engine from C++ per step (no per-kernel launch
# from Python), priced as always graph-replayed.
TRTLLM_CUDA_GRAPH_MAX_BATCH = 128
TRTLLM_TENSORRT_GRAPH_MAX_BATCH = 1 << 30


# The engines' own option names for the limits, for exports (same sources as the defaults above).
ENGINE_FLAGS: dict[EngineName, dict[str, str]] = {
    "vllm": {
        "max_seqs": "--max-num-seqs",
        "max_batched_tokens": "--max-num-batched-tokens",
        "memory_fraction": "--gpu-memory-utilization",
    },
    "sglang": {
        "max_seqs": "--max-running-requests",
        "max_batched_tokens": "--chunked-prefill-size",
        "memory_fraction": "--mem-fraction-static",
    },
    "trtllm": {
        "max_seqs": "max_batch_size",
        "max_batched_tokens": "max_num_tokens",
        "memory_fraction": "kv_cache_config.free_gpu_memory_fraction",
    },
}


def engine_limits(
    engine: EngineName,
    gpu: GPUSpec,
    tp: int,
    *,
    max_seqs: int | None = None,
    max_batched_tokens: int | None = None,
    memory_fraction: float | None = None,
    wide_ep: bool = False,
    cuda_graphs: bool | None = None,
    cuda_graph_max_batch: int | None = None,
    chunked_prefill: bool | None = None,
    trtllm_backend: str | None = None,
) -> EngineLimits:
    """The limits `engine` sets for a replica with `tp` GPUs per stage of type `gpu` (explicit values win).
    `wide_ep`: experts spread with DP attention over DeepEP, whose low-latency dispatch buffers are preallocated
    per rank; SGLang then decodes at most SGLANG_WIDE_EP_MAX_SEQS sequences per rank. `trtllm_backend`: pytorch
    (the default since TensorRT-LLM v0.19, trtllm-bench --backend pytorch) or tensorrt (a built engine)."""
    if engine == "vllm":
        # Large GPUs (not A100) get the larger batch defaults; gpu_memory_utilization of the device, 16-token
        # blocks allocated as tokens arrive (PagedAttention).
        fast = gpu.memory_bytes >= VLLM_LARGE_GPU_BYTES and "A100" not in gpu.name
        limits = EngineLimits(
            "vllm",
            VLLM_GPU_MEMORY_UTILIZATION,
            False,
            VLLM_BLOCK_SIZE,
            VLLM_MAX_NUM_SEQS_LARGE if fast else VLLM_MAX_NUM_SEQS,
            VLLM_MAX_NUM_BATCHED_TOKENS_LARGE if fast else VLLM_MAX_NUM_BATCHED_TOKENS,
            False,
            ENGINE_FLAGS["vllm"],
        )
    elif engine == "sglang":
        # mem_fraction_static of the device for weights + KV pool; page size 1; max_running_requests follows the KV
        # pool, bounded by the req_to_token pool.
        frac = sglang_mem_fraction(tp)
        small = gpu.memory_bytes < SGLANG_SMALL_GPU_BYTES
        limits = EngineLimits(
            "sglang",
            frac,
            False,
            SGLANG_PAGE_SIZE,
            SGLANG_MAX_RUNNING_REQUESTS,
            SGLANG_CHUNKED_PREFILL_SIZE_SMALL if small else SGLANG_CHUNKED_PREFILL_SIZE,
            False,
            ENGINE_FLAGS["sglang"],
            mixes_prefill=False,
        )
    else:
        # TensorRT-LLM: free_gpu_memory_fraction of the memory free after the model loads; the capacity scheduler
        # GUARANTEED_NO_EVICT reserves a request's whole prompt + output at admission.
        limits = EngineLimits(
            "trtllm",
            TRTLLM_FREE_GPU_MEMORY_FRACTION,
            True,
            TRTLLM_TOKENS_PER_BLOCK,
            TRTLLM_MAX_BATCH_SIZE,
            TRTLLM_MAX_NUM_TOKENS,
            True,
            ENGINE_FLAGS["trtllm"],
        )
    default_seqs = SGLANG_WIDE_EP_MAX_SEQS if wide_ep and engine == "sglang" else limits.max_seqs
    limits = replace(
        limits,
        memory_fraction=memory_fraction if memory_fraction is not None else limits.memory_fraction,
        max_seqs=max_seqs if max_seqs is not None else default_seqs,
        max_batched_tokens=max_batched_tokens if max_batched_tokens is not None else limits.max_batched_tokens,
        chunked_prefill=chunked_prefill if chunked_prefill is not None else True,
    )
    tensorrt = engine == "trtllm" and trtllm_backend == "tensorrt"
    # Host time per iteration [constants.ENGINE_ITERATION_OVERHEAD_S]; a TensorRT engine's C++ runtime
    # [TRTLLM_TENSORRT_ITERATION_OVERHEAD_S].
    host = TRTLLM_TENSORRT_ITERATION_OVERHEAD_S if tensorrt else ENGINE_ITERATION_OVERHEAD_S[engine]
    graph_max = 0
    if cuda_graphs is not False:
        graph_max = cuda_graph_max_batch if cuda_graph_max_batch is not None else _default_graph_max(limits, gpu, tp)
        if tensorrt and cuda_graph_max_batch is None:
            graph_max = TRTLLM_TENSORRT_GRAPH_MAX_BATCH
    return replace(limits, host_s=host, graph_max_batch=graph_max)


def sglang_mem_fraction(tp: int) -> float:
    """SGLang's default mem_fraction_static for a replica of `tp` GPUs per stage (SGLANG_MEM_FRACTION_BY_TP)."""
    return next(f for min_tp, f in SGLANG_MEM_FRACTION_BY_TP if tp >= min_tp or min_tp == 1)


def _default_graph_max(limits: EngineLimits, gpu: GPUSpec, tp: int) -> int:
    """The engine's default largest CUDA-graph decode batch (sources at the constants above)."""
    if limits.engine == "vllm":
        return min(2 * limits.max_seqs, VLLM_CUDAGRAPH_CAPTURE_CAP, limits.max_batched_tokens)
    if limits.engine == "sglang":
        small, large = next((s, lg) for cap, s, lg in SGLANG_CUDA_GRAPH_MAX_BS if gpu.memory_bytes < cap)
        return small if tp < 4 else large
    return TRTLLM_CUDA_GRAPH_MAX_BATCH


def workload_limits(w: InferenceWorkload, gpu: GPUSpec, tp: int, *, wide_ep: bool = False) -> EngineLimits:
    """The limits of a replica serving `w` (its engine, knobs and release) on `gpu` with `tp` GPUs per stage: the
    one place every serving path (fixed batch, request rate, SLA search) reads them from. The release's defaults
    (engine_releases.py) stand where the workload leaves a knob unset."""
    rel = match_release(w.engine, w.engine_version).release if w.engine_version else None
    limits = engine_limits(
        w.engine,
        gpu,
        tp,
        max_seqs=w.max_seqs if w.max_seqs is not None else (rel.max_seqs if rel else None),
        max_batched_tokens=w.max_batched_tokens,
        memory_fraction=w.memory_fraction,
        wide_ep=wide_ep,
        cuda_graphs=w.cuda_graphs,
        cuda_graph_max_batch=(
            w.cuda_graph_max_batch
            if w.cuda_graph_max_batch is not None
            else (rel.cuda_graph_max_batch if rel else None)
        ),
        chunked_prefill=w.chunked_prefill,
        trtllm_backend=w.trtllm_backend or (rel.trtllm_backend if rel else None),
    )
    if rel is not None and rel.mixes_prefill is not None:
        limits = replace(limits, mixes_prefill=rel.mixes_prefill)
    return limits
