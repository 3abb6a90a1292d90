"""SGLang's own parser on a `python -m sglang.launch_server` launch (argv after `python`: `-m sglang.launch_server
--model-path M --flag ...`), for tests/frameworks/sglang-*/check.py: an argparse parser with
ServerArgs.add_cli_args, then ServerArgs.from_cli_args and so ServerArgs.__post_init__ (python/sglang/srt/
server_args.py of the pinned release), which fills the defaults that depend on the GPU and the model (memory
fraction, chunked prefill size, CUDA-graph batch) and validates the combination (dp-attention, EP, disaggregation,
speculative decoding). No server, scheduler or model runner is started.

Stood in, the GPU runtime only: the device SGLang detects (`get_device`: "cuda"), its memory capacity (the plan's
GPU, `gpu_memory_mib` in the payload) and compute capability (`torch.cuda.get_device_capability`, `sm` in the
payload). The model is the planned one: its Hugging Face config.json (the project's preset, with its
architecture) written to a folder that stands for the launch's --model-path, which SGLang reads with transformers.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

FIELDS = (
    "model_path",
    "tp_size",
    "pp_size",
    "dp_size",
    "ep_size",
    "enable_dp_attention",
    "max_running_requests",
    "context_length",
    "mem_fraction_static",
    "page_size",
    "dtype",
    "kv_cache_dtype",
    "quantization",
    "chunked_prefill_size",
    "enable_mixed_chunk",
    "disable_cuda_graph",
    "cuda_graph_max_bs",
    "speculative_algorithm",
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
    "speculative_draft_model_path",
    "enable_eplb",
    "ep_num_redundant_experts",
    "enable_two_batch_overlap",
    "disaggregation_mode",
    "disaggregation_transfer_backend",
    "moe_a2a_backend",
)


def stand_in_gpu_runtime(memory_mib: float, sm: tuple[int, int]) -> None:
    """The device queries SGLang's server_args makes, answered as the plan's GPU would."""
    import sglang.srt.server_args as sa

    try:
        import torch
    except ImportError:  # releases whose server_args imports no torch (v0.3.0): nothing to answer
        torch = None
    if torch is not None:
        torch.cuda.get_device_capability = lambda device=None: sm  # type: ignore[assignment]
        torch.cuda.is_available = lambda: True  # type: ignore[assignment]
    if hasattr(sa, "get_device"):
        sa.get_device = lambda device_id=None: "cuda"  # type: ignore[attr-defined]
    for name in ("get_device_memory_capacity", "get_nvgpu_memory_capacity", "get_gpu_memory_capacity"):
        if hasattr(sa, name):
            setattr(sa, name, lambda device=None: memory_mib)
    if hasattr(sa, "get_device_sm"):
        sa.get_device_sm = lambda: sm[0] * 10 + sm[1]  # type: ignore[attr-defined]


def parse_with(models: dict[str, dict[str, Any]], scratch: Path) -> Any:
    def parse(argv: list[str]) -> dict[str, Any]:
        import argparse

        from sglang.srt.server_args import ServerArgs

        if argv[:2] != ["-m", "sglang.launch_server"]:
            raise ValueError(f"not a `python -m sglang.launch_server` launch: {argv[:2]}")
        parser = argparse.ArgumentParser()
        ServerArgs.add_cli_args(parser)
        args = parser.parse_args(argv[2:])
        ref = args.model_path
        if ref in models:  # the planned model's config.json in place of the hub id
            folder = scratch / str(abs(hash(ref)))
            folder.mkdir(exist_ok=True)
            (folder / "config.json").write_text(json.dumps(models[ref]))
            args.model_path = str(folder)
        server = ServerArgs.from_cli_args(args)
        out = {k: getattr(server, k, None) for k in FIELDS}
        out["model_path"] = ref
        if out["speculative_draft_model_path"] == str(args.model_path):
            out["speculative_draft_model_path"] = ref
        return out

    return parse


def main() -> None:
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from engine_check import read_payload, run

    payload = read_payload()
    major, minor = payload.get("sm", (9, 0))
    stand_in_gpu_runtime(float(payload["gpu_memory_mib"]), (int(major), int(minor)))
    with tempfile.TemporaryDirectory() as scratch:
        run(parse_with(payload.get("models", {}), Path(scratch)), payload)
