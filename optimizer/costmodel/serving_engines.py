"""What each serving engine does by default that decides a replica's capacity: how much memory the KV cache gets,
in which units, how many sequences and tokens one iteration may carry, and how a request's KV is reserved.

Read from the engines' own code (the version is named on each entry); a user's explicit setting in the workload
(`max_seqs`, `max_batched_tokens`, `memory_fraction`) replaces the default.
"""

from __future__ import annotations

from dataclasses import dataclass

from optimizer.spec.gpu_catalog import GPUSpec
from optimizer.spec.names import ENGINES, EngineName

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


def engine_limits(
    engine: EngineName,
    gpu: GPUSpec,
    tp: int,
    *,
    max_seqs: int | None = None,
    max_batched_tokens: int | None = None,
    memory_fraction: float | None = None,
    wide_ep: bool = False,
) -> EngineLimits:
    """The limits `engine` sets for a replica with `tp` GPUs per stage of type `gpu` (explicit values win).
    `wide_ep`: experts spread with DP attention over DeepEP, whose low-latency dispatch buffers are preallocated
    per rank; SGLang then decodes at most 256 sequences per rank (LMSYS large-scale EP blog, decode table: batch
    size 256 per device)."""
    big = gpu.memory_bytes >= 70 * GIB
    if engine == "vllm":
        # vllm/engine/arg_utils.py get_batch_defaults (v0.9-v0.11, `vllm serve`): >= 70 GiB and not A100 ->
        # max_num_batched_tokens 8192, max_num_seqs 1024; otherwise 2048 / 256. CacheConfig: gpu_memory_utilization
        # 0.9 of the device, block_size 16; blocks allocated as tokens arrive (PagedAttention).
        fast = big and "A100" not in gpu.name
        limits = EngineLimits(
            "vllm",
            0.9,
            False,
            16,
            1024 if fast else 256,
            8192 if fast else 2048,
            False,
            {
                "max_seqs": "--max-num-seqs",
                "max_batched_tokens": "--max-num-batched-tokens",
                "memory_fraction": "--gpu-memory-utilization",
            },
        )
    elif engine == "sglang":
        # python/sglang/srt/server_args.py (v0.4.x): mem_fraction_static 0.88 (tp1), 0.87 (tp2), 0.85 (tp4),
        # 0.81 (tp8) of the device for weights + KV pool; chunked_prefill_size 8192 (2048 under 25 GB);
        # page_size 1; max_running_requests follows the KV pool (bounded here by the cuda-graph-free default 4096
        # of its req_to_token pool).
        frac = 0.81 if tp >= 8 else 0.85 if tp >= 4 else 0.87 if tp >= 2 else 0.88
        limits = EngineLimits(
            "sglang",
            frac,
            False,
            1,
            4096,
            8192 if gpu.memory_bytes >= 25e9 else 2048,
            False,
            {
                "max_seqs": "--max-running-requests",
                "max_batched_tokens": "--chunked-prefill-size",
                "memory_fraction": "--mem-fraction-static",
            },
            mixes_prefill=False,
        )
    else:
        # TensorRT-LLM (PyTorch backend, v0.20-v1.0) llm_args: max_batch_size 2048, max_num_tokens 8192
        # [docs/source/performance/tuning-max-batch-size-and-max-num-tokens.md]; KvCacheConfig
        # free_gpu_memory_fraction 0.9 of the memory free after the model loads [perf-overview.md]; tokens_per_block
        # 32; capacity scheduler GUARANTEED_NO_EVICT reserves a request's whole prompt + output at admission.
        limits = EngineLimits(
            "trtllm",
            0.9,
            True,
            32,
            2048,
            8192,
            True,
            {
                "max_seqs": "max_batch_size",
                "max_batched_tokens": "max_num_tokens",
                "memory_fraction": "kv_cache_config.free_gpu_memory_fraction",
            },
        )
    default_seqs = 256 if wide_ep and engine == "sglang" else limits.max_seqs
    return EngineLimits(
        limits.engine,
        memory_fraction if memory_fraction is not None else limits.memory_fraction,
        limits.fraction_of_free,
        limits.block_tokens,
        max_seqs if max_seqs is not None else default_seqs,
        max_batched_tokens if max_batched_tokens is not None else limits.max_batched_tokens,
        limits.reserves_whole_request,
        limits.flag_names,
        limits.mixes_prefill,
    )
