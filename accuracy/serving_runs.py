"""The published serving benchmarks (accuracy/data/serving_runs.json, each with its source) as cost-model cases.

Kinds of rows: `saturated` (an infinite request queue: `trtllm-bench throughput`, `bench_serving --request-rate
inf`) is the replica's highest sustained output rate; `static_batch` (TensorRT-LLM v0.6 gptSessionBenchmark) is one
batch prefilled then decoded together; `rate` rows give TTFT and TPOT at a request rate; `prefill_saturated` and
`decode_batch` are the two instances of a disaggregated deployment, measured apart.
"""

from __future__ import annotations

import dataclasses
import json
from importlib import resources
from typing import Any

from accuracy.published_runs import CalibrationCase
from optimizer.costmodel.estimate import estimate
from optimizer.costmodel.serving_load import PrefillLoad, ReplicaLoad
from optimizer.frameworks.validation import validate
from optimizer.spec.cluster_loading import build_cluster
from optimizer.spec.cluster_spec import ClusterSpec
from optimizer.spec.model_loading import load_model_preset
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import InferenceWorkload

Record = dict[str, Any]

# Figures the model has no knob for; the records stay in the data set, these figures are not scored.
SKIPPED: dict[tuple[str, str], str] = {}
_NO_XQA = (
    "TensorRT-LLM v0.6 decoded GQA with its multi-head kernel (the XQA GQA decode kernel came later); decode "
    "predicted 2-2.5x faster than measured, prefill-bound rows of the same table within 18%"
)
for _rid in (
    "trtllm_v061_llama-2-70b_h100_tp4_b480_128_2048",
    "trtllm_v061_llama-2-70b_h100_tp2_b64_2048_2048",
    "trtllm_v061_llama-2-70b_a100_tp4_b240_128_2048",
):
    SKIPPED[(_rid, "output_tokens_per_s_per_gpu")] = _NO_XQA


# What each source's engine release ran that the current defaults (optimizer/costmodel/serving_engines.py) no longer
# say; a record's own field wins.
SOURCE_FACTS: dict[str, Record] = {
    # TensorRT-LLM v0.6.1 ran built TensorRT engines (gptSessionBenchmark); the PyTorch backend came with v0.19.
    "trtllm_performance_v061": {"trtllm_backend": "tensorrt"},
    # perf-overview.md's llm_options.yml: cuda_graph_config batch_sizes 1 ... 8192 with enable_padding.
    "trtllm_perf_overview_v1": {"cuda_graph_max_batch": 8192},
}
# SGLang v0.3.0 server_args.py: cuda_graph_max_bs 160 above 25 GB of GPU memory. vLLM v0.6.0
# vllm/worker/model_runner.py: _BATCH_SIZES_TO_CAPTURE = [1, 2, 4] + [8 * i for i in range(1, 33)], up to 256.
_V060_GRAPHS = {"sglang": 160, "vllm": 256}


def record_facts(rec: Record) -> Record:
    """The engine facts of a record: its own fields over its source's (SOURCE_FACTS)."""
    facts = dict(SOURCE_FACTS.get(rec["source"], {}))
    if rec["source"] == "sglang_vs_vllm060":
        facts["cuda_graph_max_batch"] = _V060_GRAPHS[rec["engine"]]
    return facts | {
        k: rec[k] for k in ("trtllm_backend", "cuda_graph_max_batch", "cuda_graphs", "chunked_prefill") if k in rec
    }


def load_serving_records() -> tuple[dict[str, Any], list[Record]]:
    """(sources by id, records) of the shipped serving data set."""
    doc = json.loads((resources.files("accuracy") / "data" / "serving_runs.json").read_text())
    return doc["meta"]["sources"], doc["records"]


def record_cluster(rec: Record) -> ClusterSpec:
    gpus = rec["tp"] * rec.get("pp", 1)
    nodes = rec.get("nodes", 1)
    # Multi-node rows ran on DGX-class H100 nodes: 8 x 400 Gb/s InfiniBand (vendor spec).
    pool = {"name": "p", "gpu": rec["gpu"], "nodes": nodes, "gpus_per_node": max(8, gpus) if nodes == 1 else 8}
    if nodes > 1:
        pool["inter_node"] = {"nics_per_node": 8, "gbits_per_s": 400}
    return build_cluster({"name": rec["id"], "pools": [pool]})


def record_workload(rec: Record) -> InferenceWorkload:
    return InferenceWorkload(
        prompt_len=max(1, round(rec["prompt_len"])),
        output_len=max(1, round(rec["output_len"])),
        batch=rec.get("batch", 1),
        precision=rec["precision"],
        kv_cache_dtype=rec["kv_cache_dtype"],
        engine=rec["engine"],
        memory_fraction=rec.get("memory_fraction"),
        max_batched_tokens=rec.get("max_batched_tokens"),
        max_seqs=rec.get("max_seqs"),
        prompt_len_cv=rec.get("prompt_len_cv", 0.0),
        output_len_cv=rec.get("output_len_cv", 0.0),
        engine_version=rec.get("engine_version"),
        weight_dtype=rec.get("weight_dtype"),
        **record_facts(rec),
    )


def record_config(rec: Record) -> ParallelConfig:
    """The configuration a record ran: serving EP spreads whole experts (etp 1)."""
    ep = rec.get("ep", 1)
    return ParallelConfig(
        tp=rec["tp"],
        pp=rec.get("pp", 1),
        dp=rec.get("dp", 1),
        ep=ep,
        etp=1 if ep > 1 else None,
        ep_comm_overlap=bool(rec.get("ep_comm_overlap", False)),
        redundant_experts=rec.get("redundant_experts", 0),
    )


def predict_serving(rec: Record) -> list[CalibrationCase]:
    """The cases of one record: one per measured figure."""
    model = load_model_preset(rec["model"])
    cluster = record_cluster(rec)
    w = record_workload(rec)
    cfg = record_config(rec)
    desc = (
        f"{rec['engine']} tp{cfg.tp} pp{cfg.pp}{f' dp{cfg.dp} ep{cfg.ep}' if cfg.ep > 1 else ''} {rec['gpu']} "
        f"{rec['prompt_len']:g}/{rec['output_len']:g}"
    )
    measured = rec["measured"]
    group = rec["source"]
    if rec["mode"] == "static_batch":
        # A batch whose KV cache does not fit runs as many sequences as fit (TensorRT-LLM's paged KV cache).
        load = ReplicaLoad(model, cluster, w, cfg, validate(model, cluster, w, cfg))
        fits = max(1, min(w.batch, int(load.kv_tokens // (w.prompt_len + w.output_len))))
        w = w.model_copy(update={"batch": fits})
        est = estimate(model, cluster, w, cfg)
        per_replica = w.batch * w.output_len / est.step_time_s
        if "output_tokens_per_s_per_gpu" in measured:
            return [
                CalibrationCase(
                    rec["id"],
                    group,
                    "output_tokens_per_s_per_gpu",
                    measured["output_tokens_per_s_per_gpu"],
                    per_replica / cfg.gpus,
                    desc,
                )
            ]
        return [
            CalibrationCase(rec["id"], group, "output_tokens_per_s", measured["output_tokens_per_s"], per_replica, desc)
        ]
    load = ReplicaLoad(model, cluster, w, cfg, validate(model, cluster, w, cfg))
    if "mixes_prefill" in rec:
        # vLLM V0 without chunked prefill (v0.6.0 below 32K context) runs prefills and decodes in separate
        # iterations: "Don't schedule decodes if prefills are scheduled" [vllm/core/scheduler.py
        # Scheduler._schedule_default]. Gone in V1, so a record fact, not a planning knob.
        load.limits = dataclasses.replace(load.limits, mixes_prefill=bool(rec["mixes_prefill"]))
    if rec["mode"] == "decode_batch":
        # A disaggregated decode instance held at `batch` sequences per attention-DP rank at the record's KV length
        # (prompts arrive prefilled): one decode iteration yields a token per sequence. The batch must fit the
        # instance's KV cache and the engine's sequence limit.
        dec = ReplicaLoad(model, cluster, w, cfg, validate(model, cluster, w, cfg), decode_only=True)
        seqs = w.batch * dec.ranks
        fits = dec.max_decoding >= seqs
        per_node = seqs / dec.iteration_s(seqs, 0.0) / rec["nodes"] if fits else 0.0
        return [
            CalibrationCase(
                rec["id"],
                group,
                "output_tokens_per_s_per_node",
                measured["output_tokens_per_s_per_node"],
                per_node,
                desc,
            )
        ]
    if rec["mode"] == "prefill_saturated":
        pre = PrefillLoad(load, 0.0)
        per_node = pre.capacity * w.prompt_len / rec["nodes"]
        return [
            CalibrationCase(
                rec["id"], group, "input_tokens_per_s_per_node", measured["input_tokens_per_s_per_node"], per_node, desc
            )
        ]
    if rec["mode"] == "saturated":
        pt = load.saturated()
        pred = pt.output_tokens_per_s if pt is not None else 0.0
        return [CalibrationCase(rec["id"], group, "output_tokens_per_s", measured["output_tokens_per_s"], pred, desc)]
    pt = load.at_rate(float(rec["rate"]) * w.output_len / rec["output_len"])
    # A source that prints the median inter-token latency instead of the median TPOT (sglang bench_serving's result
    # lines): the median gap between two tokens is a decode iteration without a prefill beside it (prefill
    # iterations are a minority of the gaps), where a request's TPOT averages them in.
    itl = "median_tpot_ms" not in measured
    tpot_ms = measured["median_itl_ms"] if itl else measured["median_tpot_ms"]
    if pt is None:
        return [CalibrationCase(rec["id"], group, "tpot_s", tpot_ms / 1000, float("inf"), desc)]
    # vLLM 0.6 multi-step scheduling (--num-scheduler-steps N) schedules once per group of N decode iterations, so
    # a request that arrives during a group waits for its end: (N - 1) / 2 iterations more on average than under
    # per-iteration scheduling [vLLM v0.6.0 vllm/engine/llm_engine.py _has_remaining_steps; vLLM blog 2024-09-05
    # "vLLM v0.6.0", multi-step scheduling]. The option is gone from current vLLM (V1), so it is a record fact,
    # not a planning knob.
    steps = int(rec.get("scheduler_steps", 1))
    ttft = pt.ttft_mean_s + (steps - 1) / 2 * pt.step_s
    return [
        CalibrationCase(
            rec["id"], group, "tpot_s", tpot_ms / 1000, load.iteration_s(pt.decoding, 0.0) if itl else pt.step_s, desc
        ),
        CalibrationCase(rec["id"], group, "ttft_s", measured["median_ttft_ms"] / 1000, ttft, desc),
    ]


def held_out_sources() -> set[str]:
    """Sources marked `held_out` in the data set's meta: public figures the serving constants were never fitted on,
    scored apart (benchmarks/serving_accuracy.py)."""
    sources, _ = load_serving_records()
    return {sid for sid, src in sources.items() if src.get("held_out")}


def run_serving(*, held_out: bool = False) -> list[CalibrationCase]:
    """Every scored serving case of the sources the constants were fitted on (held_out: of the held-out sources
    instead)."""
    _, records = load_serving_records()
    apart = held_out_sources()
    return [
        case
        for rec in records
        if (rec["source"] in apart) == held_out
        for case in predict_serving(rec)
        if (case.id, case.metric) not in SKIPPED
    ]


def held_out_serving() -> list[tuple[CalibrationCase, str]]:
    """The figures not scored, with why and the model's prediction."""
    _, records = load_serving_records()
    return [
        (case, SKIPPED[(case.id, case.metric)])
        for rec in records
        for case in predict_serving(rec)
        if (case.id, case.metric) in SKIPPED
    ]
