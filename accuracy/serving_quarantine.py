"""The serving quarantine: published load measurements (accuracy/data/quarantine/serving_*.json) from sources the
serving model was never fitted on, priced by the latency simulation (optimizer/costmodel/serving_sim.py) and
scored, never fitted. Each source's first score is logged, dated, in accuracy/data/quarantine/serving_LOG.md
before any change that looks at it.

Kinds of rows: `burst` (`vllm bench serve` / `bench_serving` without a request rate or a concurrency limit: every
one of `requests` prompts is sent at t = 0 and the engine admits them as its KV cache and max_seqs allow) and
`closed_loop` (`--max-concurrency N`: N users, each sending its next request when the previous one completes).
Scored figures: mean and median TTFT, mean TPOT, and the output throughput over the run (generated tokens over
the benchmark's duration).

Lengths: where a record's table names its dataset (`ShareGPT`, `random`), its requests are drawn from that dataset's
length distribution (costmodel/request_lengths.py) at the record's measured mean lengths; `lengths="means"` prices
every request at the means, as the model did before the distributions [issue 55 §1].
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any, Literal

from accuracy.published_runs import CalibrationCase
from accuracy.serving_runs import record_cluster, record_config, record_workload
from optimizer.costmodel.serving_load import ReplicaLoad
from optimizer.costmodel.serving_sim import simulate
from optimizer.frameworks.validation import validate
from optimizer.spec.model_loading import load_model_preset

Record = dict[str, Any]
METRICS = ("mean_ttft_ms", "median_ttft_ms", "mean_tpot_ms", "output_tokens_per_s")
Lengths = Literal["dataset", "means"]
# The datasets the quarantined sources name in their result blocks' titles (the `table` field, copied from the
# source: "... ShareGPT", "... random 4K"), as request_lengths names them.
DATASET_WORDS = (("sharegpt", "sharegpt"), ("random", "random"))


def load_quarantine() -> tuple[dict[str, Any], list[Record]]:
    """(sources by id, records) of every quarantine file."""
    folder = resources.files("accuracy") / "data" / "quarantine"
    sources: dict[str, Any] = {}
    records: list[Record] = []
    for f in sorted(folder.iterdir(), key=lambda p: p.name):
        if f.name.startswith("serving_") and f.name.endswith(".json"):
            doc = json.loads(f.read_text())
            sources |= doc["meta"]["sources"]
            records += doc["records"]
    return sources, records


def model_class(rec: Record) -> str:
    """dense, moe, or moe_ep_adp (experts spread over EP ranks, or attention data parallel)."""
    model = load_model_preset(rec["model"])
    if model.moe is None:
        return "dense"
    return "moe_ep_adp" if rec.get("ep", 1) > 1 or rec.get("dp", 1) > 1 else "moe"


def record_dataset(rec: Record) -> str | None:
    """The dataset a record's table names, or None."""
    table = str(rec.get("table", "")).lower()
    return next((name for word, name in DATASET_WORDS if word in table), None)


def predict_quarantine(rec: Record, lengths: Lengths = "dataset") -> list[CalibrationCase]:
    """The scored figures of one quarantined record; `lengths`: the named dataset's distribution or the means."""
    model = load_model_preset(rec["model"])
    cluster = record_cluster(rec)
    w = record_workload(rec)
    dataset = record_dataset(rec)
    if lengths == "dataset" and dataset is not None:
        w = type(w).model_validate({**w.model_dump(), "length_distribution": dataset})
    cfg = record_config(rec)
    load = ReplicaLoad(model, cluster, w, cfg, validate(model, cluster, w, cfg))
    n = int(rec["requests"])
    # Every request scored, as the benchmark does.
    if rec["mode"] == "closed_loop":
        rep = simulate(load, concurrency=int(rec["concurrency"]), requests=n, warmup=0.0)
    else:
        rep = simulate(load, burst=True, requests=n, warmup=0.0)
    desc = f"{rec['engine']} {rec.get('engine_version', '?')} tp{cfg.tp} ep{cfg.ep} {rec['gpu']} {rec['mode']} {n}"
    got = {
        "mean_ttft_ms": rep.ttft.mean * 1000,
        "median_ttft_ms": rep.ttft.p50 * 1000,
        "mean_tpot_ms": rep.tpot.mean * 1000,
        "output_tokens_per_s": rep.output_tokens_per_s,
    }
    m = rec["measured"]
    return [CalibrationCase(rec["id"], rec["source"], k, float(m[k]), got[k], desc) for k in METRICS if k in m]
