"""Serving engine releases: the behaviour and defaults that changed between releases, each tied to a dated release
with its source [issue 50 §3]. A workload names its release (`engine_version`); the release's facts are the defaults
a user's explicit setting still overrides. A release the table does not hold is priced as the nearest one it does
(by version number) and marked novel: the estimate says so and its intervals widen by RELEASE_NOVELTY_FACTOR.

Facts kept per release (None: the current defaults of serving_engines.py, read from the newest code):
- `mixes_prefill`: prefill and decodes in one iteration (vLLM V0 below 32K context did not: chunked prefill off,
  "Don't schedule decodes if prefills are scheduled", vllm/core/scheduler.py at v0.6.0);
- `cuda_graph_max_batch`: the largest decode batch replayed from a CUDA graph;
- `max_seqs`: the default sequence limit;
- `trtllm_backend`: TensorRT-LLM's default runtime.
"""

from __future__ import annotations

from dataclasses import dataclass

from optimizer.errors import DomainError
from optimizer.spec.names import EngineName

RELEASE_NOVELTY_FACTOR = 2.0
"""An unknown release's intervals widen by this factor on each side: the throughput of one model on one engine moved
2-3x across releases within months (issue 50, on published figures), so a release the table lacks may sit that far
from its nearest neighbour's price."""


@dataclass(frozen=True)
class EngineRelease:
    """One engine release and what it runs by default that the newest defaults do not say."""

    engine: EngineName
    version: str
    date: str
    """Release date (ISO), or the month when the source gives only that."""
    source: str
    """Where the release's date and facts come from."""
    mixes_prefill: bool | None = None
    cuda_graph_max_batch: int | None = None
    max_seqs: int | None = None
    trtllm_backend: str | None = None

    @property
    def key(self) -> tuple[int, ...]:
        return version_key(self.version)


RELEASES: tuple[EngineRelease, ...] = (
    EngineRelease(
        "vllm",
        "0.6.0",
        "2024-09-04",
        "vLLM blog 2024-09-05 'vLLM v0.6.0'; V0 scheduler without chunked prefill below 32K context (vllm/config.py "
        "SchedulerConfig, vllm/core/scheduler.py _schedule_default at v0.6.0); max_num_seqs 256 (engine/arg_utils.py); "
        "graphs captured up to 256 (worker/model_runner.py _BATCH_SIZES_TO_CAPTURE)",
        mixes_prefill=False,
        cuda_graph_max_batch=256,
        max_seqs=256,
    ),
    EngineRelease(
        "vllm",
        "0.8.0",
        "2025-03-18",
        "vLLM v0.8.0 release notes: 'We have now enabled V1 engine by default (#13726)' (quoted in instructlab/ui "
        "PR #679, 2025-03-19); V1 schedules chunked prefill beside the decodes (v1/core/sched/scheduler.py)",
        mixes_prefill=True,
    ),
    EngineRelease(
        "vllm",
        "0.11.0",
        "2025-10-02",
        "vLLM v0.11.0 release notes: V0 engine removed, FULL_AND_PIECEWISE CUDA graphs by default (quoted in "
        "pan-webis-de/pan-code PR #27, 2025-10-07); batch and graph defaults as serving_engines.py reads them",
        mixes_prefill=True,
    ),
    EngineRelease(
        "sglang",
        "0.3.0",
        "2024-09-04",
        "sgl-project/sglang benchmark/benchmark_vllm_060/README.md (120affb, SGLang v0.3.0 against vLLM v0.6.0); "
        "server_args.py at v0.3.0: cuda_graph_max_bs 160 above 25 GB",
        mixes_prefill=False,
        cuda_graph_max_batch=160,
    ),
    EngineRelease(
        "sglang",
        "0.5.3",
        "2025-10",
        "gpustack/gpustack docs/performance-lab/deepseek-r1/h200.md (a5c9faf) runs it; server_args.py defaults as "
        "serving_engines.py reads them (sgl-project/sglang 469c63e): no mixed chunks (enable_mixed_chunk False)",
        mixes_prefill=False,
    ),
    EngineRelease(
        "trtllm",
        "0.6.1",
        "2023-12",
        "NVIDIA/TensorRT-LLM docs/source/performance.md (138f96d, v0.6.1): built TensorRT engines "
        "(gptSessionBenchmark)",
        trtllm_backend="tensorrt",
    ),
    EngineRelease(
        "trtllm",
        "1.0.0",
        "2025-09",
        "NVIDIA/TensorRT-LLM docs/source/performance/perf-overview.md (00f3768): PyTorch backend the default "
        "(trtllm-bench --backend pytorch); llm_args.py CudaGraphConfig default max_batch_size 128",
        trtllm_backend="pytorch",
        cuda_graph_max_batch=128,
    ),
)


def version_key(version: str) -> tuple[int, ...]:
    """'0.5.5.post1' -> (0, 5, 5): the numeric release, suffixes dropped."""
    parts: list[int] = []
    for piece in version.strip().lstrip("v").split("."):
        digits = "".join(ch for ch in piece if ch.isdigit()) if piece[:1].isdigit() else ""
        if not digits:
            break
        parts.append(int(digits))
    if not parts:
        raise DomainError("workload.engine_version", f"'{version}' is not a release number such as 0.11.0")
    return tuple(parts)


@dataclass(frozen=True)
class ReleaseMatch:
    """The release a workload's engine_version is priced as."""

    release: EngineRelease
    asked: str
    exact: bool
    """False: the table lacks the asked release; the nearest stands in and the band widens."""

    def note(self) -> str:
        r = self.release
        if self.exact:
            return f"{r.engine} {r.version} ({r.date}): its defaults as released [{r.source}]."
        return (
            f"{r.engine} {self.asked} is not in the release table: priced as the nearest known release {r.version} "
            f"({r.date}); a release the table lacks may differ, so the intervals are widened "
            f"x{RELEASE_NOVELTY_FACTOR:g}."
        )


def match_release(engine: EngineName, version: str) -> ReleaseMatch:
    """The table's release for `engine` `version`: the same numeric release, or the nearest (ties: the newer)."""
    key = _padded(version_key(version))
    mine = [r for r in RELEASES if r.engine == engine]
    for r in mine:
        if _padded(r.key) == key:
            return ReleaseMatch(r, version, True)

    def distance(r: EngineRelease) -> float:
        # Lexicographic on (major, minor, patch): a minor step outweighs any patch difference.
        return sum(abs(x - y) * 1000.0 ** (3 - i) for i, (x, y) in enumerate(zip(_padded(r.key), key, strict=True)))

    best = min(mine, key=lambda r: (distance(r), tuple(-x for x in r.key)))
    return ReleaseMatch(best, version, False)


def _padded(key: tuple[int, ...]) -> tuple[int, ...]:
    return (*key, 0, 0, 0, 0)[:4]
