"""The serving-engine options a launch may use at the release the plan names, and the engine knobs the plan priced
at that release (its own defaults where engine_releases.py says the release changed them).

A launch is written for the release the workload names (`engine_version`, for the engine it was priced on), read as
the nearest release optimizer/costmodel/engine_releases.py knows (the same rule the estimate prices it by); no
release: the newest options. An option the release lacks is left out where the plan keeps the engine's implicit
value (pipeline size 1), and is an error naming the knob otherwise: a launch never silently runs something else.
"""

from __future__ import annotations

from dataclasses import dataclass

from optimizer.costmodel.engine_releases import EngineRelease, match_release
from optimizer.errors import DomainError
from optimizer.spec.workload import InferenceWorkload

# Options absent at a known release, each read from the release's own parser (tests/frameworks/<engine>-<release>/
# parses every launch with it) or, for the release without a pinned environment (vLLM 0.8.0), its source at the tag.
LACKS: dict[tuple[str, str], frozenset[str]] = {
    # vllm engine/arg_utils.py at v0.6.0 (tests/frameworks/vllm-0.6): no data parallel, expert parallel or EPLB
    # group, speculative decoding as --speculative-model / --num-speculative-tokens, no --compilation-config or
    # --kv-transfer-config, and --enable-chunked-prefill a StoreBoolean taking true / false (no --no- form).
    ("vllm", "0.6.0"): frozenset(
        {
            "--data-parallel-size",
            "--enable-expert-parallel",
            "--enable-eplb",
            "--eplb-config",
            "--num-redundant-experts",
            "--speculative-config",
            "--compilation-config",
            "--kv-transfer-config",
            "--no-enable-chunked-prefill",
        }
    ),
    # vllm engine/arg_utils.py at v0.8.0: no EPLB (vllm-project/vllm PR #18343, v0.10.0) and --enable-chunked-prefill
    # still a StoreBoolean (BooleanOptionalAction from the v0.9.0 config-class arguments).
    ("vllm", "0.8.0"): frozenset(
        {"--enable-eplb", "--eplb-config", "--num-redundant-experts", "--no-enable-chunked-prefill"}
    ),
    # sglang python/sglang/srt/server_args.py at v0.3.0 (tests/frameworks/sglang-0.3): tp, dp, memory, scheduling and
    # --disable-cuda-graph only; --kv-cache-dtype choices auto / fp8_e5m2; CUDA graphs captured up to a fixed 160.
    ("sglang", "0.3.0"): frozenset(
        {
            "--pp-size",
            "--ep-size",
            "--enable-dp-attention",
            "--enable-two-batch-overlap",
            "--ep-num-redundant-experts",
            "--enable-eplb",
            "--disaggregation-mode",
            "--disaggregation-transfer-backend",
            "--speculative-algorithm",
            "--cuda-graph-max-bs",
            "fp8_e4m3",
        }
    ),
    # trtllm-serve is not in TensorRT-LLM 0.6.1, whose published figures ran built engines through
    # gptSessionBenchmark (docs/source/performance.md at v0.6.1); its command reference is in the docs from v0.18
    # (nvidia.github.io/TensorRT-LLM/0.18.2/commands/trtllm-serve.html, --backend pytorch only there; v1.0.0's
    # serve.py takes pytorch | tensorrt | _autodeploy).
    ("trtllm", "0.6.1"): frozenset({"trtllm-serve"}),
}


@dataclass(frozen=True)
class LaunchRelease:
    """The release a launch is written for: the known release the plan was priced as, or None (the newest)."""

    engine: str
    release: EngineRelease | None

    @property
    def name(self) -> str:
        return f"{self.engine} {self.release.version}" if self.release else f"{self.engine} (newest)"

    def has(self, option: str) -> bool:
        if self.release is None:
            return True
        return option not in LACKS.get((self.engine, self.release.version), frozenset())

    def require(self, option: str, knob: str, what: str) -> None:
        """`option` is needed for `what` the plan priced: an error naming the knob when the release lacks it."""
        if not self.has(option):
            raise DomainError(
                f"export.{knob}",
                f"{self.name} has no {option} ({what} as planned); plan with a newer engine_version of {self.engine} "
                "or without it",
            )


def launch_release(engine: str, w: InferenceWorkload) -> LaunchRelease:
    """The release the workload names for `engine` (a workload priced on another engine: the newest)."""
    if w.engine_version and w.engine == engine:
        return LaunchRelease(engine, match_release(w.engine, w.engine_version).release)
    return LaunchRelease(engine, None)


@dataclass(frozen=True)
class PricedKnobs:
    """The engine knobs the estimate priced for the workload (serving_engines.workload_limits' precedence: the
    workload's setting, else the release's changed default, else the engine's newest default = None here)."""

    max_seqs: int
    cuda_graph_max_batch: int | None
    release_graph_default: bool
    """True when cuda_graph_max_batch is the release's own built-in default (not the user's setting)."""
    chunked_prefill: bool | None
    mixes_prefill: bool | None
    trtllm_backend: str


def priced_knobs(engine: str, w: InferenceWorkload) -> PricedKnobs:
    rel = launch_release(engine, w).release
    graph = w.cuda_graph_max_batch
    release_graph = graph is None and rel is not None and rel.cuda_graph_max_batch is not None
    if release_graph and rel is not None:
        graph = rel.cuda_graph_max_batch
    return PricedKnobs(
        # The sequences the plan runs per replica (attention rank): its limit when set, else the planned batch.
        max_seqs=w.max_seqs if w.max_seqs is not None else w.batch,
        cuda_graph_max_batch=graph,
        release_graph_default=release_graph,
        chunked_prefill=w.chunked_prefill,
        mixes_prefill=rel.mixes_prefill if rel is not None else None,
        trtllm_backend=w.trtllm_backend or (rel.trtllm_backend if rel and rel.trtllm_backend else "pytorch"),
    )


def vllm_capture_sizes(largest: int) -> list[int]:
    """vLLM's own capture list up to `largest` ([1, 2, 4] + multiples of 8: vllm/config/scheduler.py
    cuda_graph_sizes at v0.11.0), ending at `largest` itself so the largest graph is the one priced."""
    sizes = [s for s in [1, 2, 4, *range(8, largest + 1, 8)] if s <= largest]
    return sizes if sizes and sizes[-1] == largest else [*sizes, largest]
