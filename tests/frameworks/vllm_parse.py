"""vLLM's own parser on a `vllm serve` launch (argv after `vllm`: `serve MODEL --flag ...`), for tests/frameworks/
vllm-*/check.py: the `vllm serve` subparser of the pinned release (a FlexibleArgumentParser with the subcommand's
`model_tag` positional and vllm/entrypoints/openai/cli_args.py make_arg_parser, which adds EngineArgs.add_cli_args),
then EngineArgs.from_cli_args (vllm/engine/arg_utils.py) and its __post_init__. No engine is constructed.

Only the GPU runtime is stood in: vLLM infers its device from the platform it detects (vllm/platforms/__init__.py;
CacheConfig / DeviceConfig defaults read it), and this machine has none, so a platform naming CUDA takes its place.
"""

from __future__ import annotations

from typing import Any

FIELDS = (
    "model",
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "data_parallel_size",
    "enable_expert_parallel",
    "max_num_seqs",
    "max_model_len",
    "gpu_memory_utilization",
    "block_size",
    "dtype",
    "kv_cache_dtype",
    "quantization",
    "enable_chunked_prefill",
    "max_num_batched_tokens",
    "enforce_eager",
    "cuda_graph_sizes",
    "enable_eplb",
    "num_redundant_experts",
    "speculative_config",
    "num_speculative_tokens",
    "speculative_model",
)


def hide_cuda_extensions() -> None:
    """vLLM's CUDA extension modules (vllm._C, vllm._core_C, built against the release's CUDA torch) cannot load on
    this machine; vLLM's own code has a path for a platform without them (vllm/_core_ext.py at v0.6.0:
    `core_C_available = importlib.util.find_spec('._core_C', 'vllm') is not None`, else its Python ScalarType), so
    they are reported absent."""
    import importlib.util

    real = importlib.util.find_spec

    def find_spec(name: str, package: str | None = None) -> Any:
        full = importlib.util.resolve_name(name, package) if name.startswith(".") else name
        if full in ("vllm._C", "vllm._core_C", "vllm._moe_C"):
            return None
        return real(name, package)

    importlib.util.find_spec = find_spec  # type: ignore[assignment]


def stand_in_gpu_runtime() -> None:
    """A CUDA platform in place of the one vLLM would detect on a GPU machine (the device queries only)."""
    hide_cuda_extensions()
    import vllm.platforms as platforms

    try:
        from vllm.platforms.interface import Platform, PlatformEnum
    except ImportError:  # releases before vllm/platforms/interface.py: the platform is read at import
        return

    class StandInCuda(Platform):
        _enum = PlatformEnum.CUDA
        device_name = "cuda"
        device_type = "cuda"
        dispatch_key = "CUDA"
        ray_device_key = "GPU"

    platforms._current_platform = StandInCuda()  # type: ignore[attr-defined]
    if hasattr(platforms, "current_platform") and not callable(getattr(platforms, "__getattr__", None)):
        platforms.current_platform = platforms._current_platform  # type: ignore[attr-defined]


def plain(value: Any) -> Any:
    """A config object as JSON-able fields (dataclasses, pydantic dataclasses), else the value."""
    if value is None or isinstance(value, str | int | float | bool | list | dict):
        return value
    fields = getattr(value, "__dataclass_fields__", None)
    if fields:
        return {k: plain(getattr(value, k, None)) for k in fields if not k.startswith("_")}
    return str(value)


def parse(argv: list[str]) -> dict[str, Any]:
    from vllm.engine.arg_utils import EngineArgs
    from vllm.entrypoints.openai.cli_args import make_arg_parser
    from vllm.utils import FlexibleArgumentParser

    if argv[:1] != ["serve"]:
        raise ValueError(f"not a `vllm serve` launch: {argv[:2]}")
    parser = make_arg_parser(FlexibleArgumentParser())
    if not any(a.dest == "model_tag" for a in parser._actions):
        # the positional model of `vllm serve`: make_arg_parser's own at v0.11.0 (entrypoints/openai/cli_args.py),
        # the serve subparser's at v0.6.0 (vllm/scripts.py)
        parser.add_argument("model_tag", type=str)
    args = parser.parse_args(argv[1:])
    args.model = args.model_tag  # what `vllm serve` does with its positional model
    engine = EngineArgs.from_cli_args(args)
    out = {k: plain(getattr(engine, k, None)) for k in FIELDS}
    compilation = getattr(engine, "compilation_config", None)
    out["compilation_config"] = plain(compilation)
    kv = getattr(engine, "kv_transfer_config", None)
    out["kv_transfer_config"] = plain(kv)
    eplb = getattr(engine, "eplb_config", None)
    out["eplb_config"] = plain(eplb)
    return out


def main() -> None:
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from engine_check import read_payload, run

    payload = read_payload()
    stand_in_gpu_runtime()
    run(parse, payload)
