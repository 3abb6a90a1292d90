"""The serving plans the engine checks export (tests/frameworks/test_engines.py, test_trtllm.py): real plans from
the serving and SLA planners (a dense and a MoE model on one replica, an SLA fleet, a disaggregated fleet), a
hand-built fleet of TP4 and TP8 groups, and hand-built configurations with the knobs a launch must carry (attention
DP with EP, FP8 KV, speculative decoding, EPLB, chunked prefill off, CUDA graphs off or capped, a pipeline), at
the releases the engines' pinned environments hold. Each launch comes with the workload and configuration it was
priced with, and the GPU, so a test can compare what the engine parsed with what the cost model priced."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from importlib import resources

from optimizer.costmodel.serving_engines import EngineLimits, workload_limits
from optimizer.exports.export_record import Export
from optimizer.exports.launch import export, export_fleet
from optimizer.search.fleet_result import FleetGroup, FleetPlan, ReplicaShape
from optimizer.search.planner import plan
from optimizer.spec.cluster_loading import resolve_cluster
from optimizer.spec.gpu_catalog import GPUSpec, resolve_gpu
from optimizer.spec.model_loading import load_model_preset
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import InferenceWorkload
from tests.optimizer.helpers import h100_a100_priced

H100 = "H100-SXM-80GB"
REFS = {
    "llama-3-8b": "meta-llama/Meta-Llama-3-8B",
    "llama-3-70b": "meta-llama/Meta-Llama-3-70B",
    "qwen3-30b-a3b": "Qwen/Qwen3-30B-A3B",
    "deepseek-v3": "deepseek-ai/DeepSeek-V3",
}
# Each preset's Hugging Face architecture (its checkpoint's config.json "architectures"), which SGLang reads.
ARCHITECTURES = {
    "llama-3-8b": "LlamaForCausalLM",
    "llama-3-70b": "LlamaForCausalLM",
    "qwen3-30b-a3b": "Qwen3MoeForCausalLM",
    "deepseek-v3": "DeepseekV3ForCausalLM",
}
OLD = {("vllm", "0.6.0"), ("sglang", "0.3.0")}
"""The oldest releases the environments pin: no expert parallel, attention DP or speculative configuration yet
(engine_options.LACKS)."""


@dataclass(frozen=True)
class Launch:
    """One launch and what it was priced with."""

    label: str
    model: str
    export: Export
    w: InferenceWorkload
    c: ParallelConfig
    gpu: str
    role: str = "replica"

    @property
    def gpu_spec(self) -> GPUSpec:
        return resolve_gpu(self.gpu)

    def limits(self) -> EngineLimits:
        """The engine limits the cost model priced the replica with (serving_engines.workload_limits)."""
        wide_ep = self.c.attention_dp and self.c.ep > 1
        return workload_limits(
            self.w.model_copy(update={"engine": self.export.tool}), self.gpu_spec, self.c.tp, wide_ep=wide_ep
        )


def hf_config(model: str) -> dict[str, object]:
    doc = json.loads((resources.files("optimizer.spec.presets.models") / f"{model}.json").read_text())
    return {**doc, "architectures": [ARCHITECTURES[model]]}


def _single(label: str, engine: str, model: str, w: InferenceWorkload, c: ParallelConfig, gpu: str = H100) -> Launch:
    spec = load_model_preset(model)
    return Launch(label, model, export(engine, spec, w, c, REFS[model]), w, c, gpu)


@functools.cache
def planned_replica(model: str, engine: str) -> tuple[InferenceWorkload, ParallelConfig]:
    """The serving planner's pick for `model` on one DGX H100 (throughput at 64 sequences, FP8 KV)."""
    w = InferenceWorkload(
        prompt_len=2048, output_len=256, batch=64, objective="throughput", kv_cache_dtype="fp8", engine=engine
    )
    spec = load_model_preset(model)
    res = plan(spec, resolve_cluster("dgx-h100"), w, time_limit_s=30)
    assert res.plan is not None, res.explanation
    return w, res.plan.config


@functools.cache
def planned_fleet(engine: str, disaggregation: str) -> tuple[InferenceWorkload, FleetPlan]:
    """The SLA planner's fleet: 4,096-token prompts at 3 requests/s within TPOT 40 ms and TTFT 3 s on H100 + A100."""
    w = InferenceWorkload(
        prompt_len=4096,
        output_len=256,
        rate=3,
        tpot_ms=40,
        ttft_ms=3000,
        kv_cache_dtype="fp8",
        objective="gpus",
        engine=engine,
        disaggregation=disaggregation,  # type: ignore[arg-type]
    )
    res = plan(load_model_preset("llama-3-8b"), h100_a100_priced("h100-a100", h100_nodes=2), w, time_limit_s=20)
    assert res.fleet is not None, res.explanation
    return w, res.fleet


def mixed_fleet() -> FleetPlan:
    """An aggregated fleet of Llama 3 70B replicas, one TP4 and one TP8, 1,024 sequences in all (the issue's SLA
    fleet), each group with its own limits."""

    def shape(tp: int, seqs: int, tokens: int, frac: float) -> ReplicaShape:
        return ReplicaShape(
            role="replica",
            pool="h100",
            gpu=H100,
            tp=tp,
            pp=1,
            ep=1,
            gpus=tp,
            rate=1.0,
            max_seqs=seqs,
            max_batched_tokens=tokens,
            memory_fraction=frac,
        )

    groups = [
        FleetGroup(shape=shape(4, 384, 4096, 0.88), count=1),
        FleetGroup(shape=shape(8, 640, 8192, 0.85), count=1),
    ]
    return FleetPlan(
        mode="aggregated",
        groups=groups,
        gpus=12,
        capacity_rate=2.0,
        served_rate=2.0,
        ttft_p90_s=1.0,
        tpot_s=0.03,
        output_tokens_per_s_per_gpu=1000.0,
        why="hand-built",
    )


def priced_group(w: InferenceWorkload, s: ReplicaShape) -> InferenceWorkload:
    """The workload the SLA search priced one group with: its own sequence limit (per attention rank), token budget
    and memory share (ReplicaShape)."""
    update = {"batch": s.max_seqs, "max_seqs": s.max_seqs, "max_batched_tokens": s.max_batched_tokens}
    return w.model_copy(update={**update, "memory_fraction": s.memory_fraction})


def fleet_launches(label: str, engine: str, w: InferenceWorkload, fleet: FleetPlan, model: str) -> list[Launch]:
    spec = load_model_preset(model)
    exports = export_fleet(engine, spec, w, fleet, REFS[model])
    out = []
    for g, e in zip(fleet.groups, exports, strict=False):
        s = g.shape
        c = ParallelConfig(tp=s.tp, pp=s.pp, dp=s.dp, ep=s.ep, etp=1 if s.ep > 1 else None, ep_comm_overlap=s.overlap)
        out.append(Launch(f"{label} {s.role} tp{s.tp}", model, e, priced_group(w, s), c, s.gpu, s.role))
    return out


def hand_built(engine: str, version: str | None) -> list[Launch]:
    """Configurations with every knob a launch carries, priced at `version` of `engine`."""
    base = dict(prompt_len=2048, output_len=512, batch=32, engine=engine, engine_version=version)
    llama, ds = "llama-3-8b", "deepseek-v3"
    out = [
        _single("dense tp2 bf16", engine, llama, InferenceWorkload(**base), ParallelConfig(tp=2)),  # type: ignore[arg-type]
        _single(
            "dense knobs",
            engine,
            llama,
            InferenceWorkload(
                **base,
                kv_cache_dtype="fp8",
                chunked_prefill=False,
                cuda_graphs=False,
                memory_fraction=0.85,
                max_seqs=48,
            ),  # type: ignore[arg-type]
            ParallelConfig(tp=1),
        ),
        _single(
            "dense budget",
            engine,
            llama,
            InferenceWorkload(
                **base, max_batched_tokens=4096, cuda_graph_max_batch=None if (engine, version) in OLD else 48
            ),  # type: ignore[arg-type]
            ParallelConfig(tp=4),
        ),
    ]
    if (engine, version) != ("sglang", "0.3.0"):  # SGLang 0.3.0 has no pipeline parallelism
        out.append(
            _single(
                "dense pp2",
                engine,
                llama,
                InferenceWorkload(**base),
                ParallelConfig(tp=4, pp=2, layers_per_stage=[16, 16]),
            )
        )  # type: ignore[arg-type]
    if (engine, version) not in OLD:
        moe = InferenceWorkload(**base, precision="fp8", kv_cache_dtype="fp8", spec_tokens=2, acceptance_rate=0.8)  # type: ignore[arg-type]
        out += [
            _single(
                "moe adp8 ep8 mtp", engine, ds, moe, ParallelConfig(tp=1, dp=8, ep=8, etp=1, layers_per_stage=[61])
            ),
            _single("dense eagle", engine, llama, moe.model_copy(update={"precision": "bf16"}), ParallelConfig(tp=1)),
        ]
    if (engine, version) not in OLD and engine != "trtllm":  # TensorRT-LLM's load balancer is refused (trtllm.py)
        eplb = ParallelConfig(tp=1, dp=8, ep=8, etp=1, redundant_experts=32, layers_per_stage=[61])
        budget = InferenceWorkload(**base, max_batched_tokens=2048)  # type: ignore[arg-type]
        out.append(_single("moe adp8 ep8 eplb budget", engine, ds, budget, eplb))
    return out


def real_plans(engine: str) -> list[Launch]:
    """The planners' own plans, at the newest release."""
    out = []
    for model in ("llama-3-8b", "qwen3-30b-a3b"):
        w, c = planned_replica(model, engine)
        out.append(_single(f"planned {model} tp{c.tp} dp{c.dp} ep{c.ep}", engine, model, w, c))
    for mode in ("off", "on"):
        w, fleet = planned_fleet(engine, mode)
        out += fleet_launches(f"SLA fleet disaggregation={mode}", engine, w, fleet, "llama-3-8b")
    w = InferenceWorkload(prompt_len=4096, output_len=256, rate=2, tpot_ms=40, objective="gpus", engine=engine)
    out += fleet_launches("TP4 + TP8 fleet", engine, w, mixed_fleet(), "llama-3-70b")
    return [la for la in out if la.export.content.split()[0] != "#"]


def launcher_argv(e: Export, launcher: str) -> list[str]:
    """What the launcher receives when the export is pasted into bash (tests/optimizer/exports/test_export_paste)."""
    import tempfile
    from pathlib import Path

    from tests.optimizer.exports.test_export_paste import argv

    with tempfile.TemporaryDirectory() as scratch:
        return argv(e.script(), launcher, cwd=Path(scratch))
