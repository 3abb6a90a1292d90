"""The user's trace and a named dataset through both doors (issue 55 §1): `meshplan estimate --mode inference
--workload-trace FILE` / `--dataset NAME`, and `"workload_trace"` / `"length_distribution"` in a POST /v1/estimates
body; a bad trace line is refused naming its line and field."""

from __future__ import annotations

import json
from pathlib import Path

from fastapi.testclient import TestClient
from typer.testing import CliRunner

from api.cli import app
from tests.api.helpers import make_cluster, make_model, ok

RUNNER = CliRunner()
SERVING = ["estimate", "--model", "llama-3-8b", "--cluster", "dgx-h100:1", "--mode", "inference", "--tp", "1"]
# Mooncake / aiperf mooncake_trace lines: timestamp (ms), input_length, output_length.
LINES = [{"timestamp": 250 * i, "input_length": 200 + 40 * i, "output_length": 30 + i} for i in range(40)]


def _trace_file(tmp_path: Path, lines: list[dict[str, int]]) -> Path:
    f = tmp_path / "trace.jsonl"
    f.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return f


def test_estimate_replays_a_trace_file(tmp_path: Path) -> None:
    result = RUNNER.invoke(app, [*SERVING, "--workload-trace", str(_trace_file(tmp_path, LINES)), "--json"])
    assert result.exit_code == 0, result.output
    ll = json.loads(result.output)["load_latency"]
    assert ll["trace_requests_per_replica"] == 40 and ll["rate_per_replica"] is None
    for which in ("ttft", "tpot", "itl", "e2e"):
        assert 0 < ll[which]["p50_s"] <= ll[which]["p90_s"] <= ll[which]["p99_s"], which
    assert ll["e2e"]["p50_s"] > ll["ttft"]["p50_s"]
    text = RUNNER.invoke(app, [*SERVING, "--workload-trace", str(_trace_file(tmp_path, LINES))])
    assert "workload trace (40 requests at their own times)" in text.output and "end-to-end" in text.output


def test_estimate_draws_a_named_dataset(tmp_path: Path) -> None:
    shape = ["--prompt-len", "300", "--output-len", "200", "--concurrency", "32", "--json"]
    means = json.loads(RUNNER.invoke(app, [*SERVING, *shape]).output)["load_latency"]
    named = RUNNER.invoke(app, [*SERVING, *shape, "--dataset", "sharegpt"])
    assert named.exit_code == 0, named.output
    spread = json.loads(named.output)["load_latency"]
    assert spread["e2e"]["p90_s"] / spread["e2e"]["p50_s"] > means["e2e"]["p90_s"] / means["e2e"]["p50_s"]
    bad = RUNNER.invoke(app, [*SERVING, *shape, "--dataset", "lmsys"])
    assert bad.exit_code == 2 and "workload.length_distribution" in bad.output, bad.output


def test_a_bad_trace_line_is_one_error_naming_line_and_field(tmp_path: Path) -> None:
    lines = [*LINES[:2], {"timestamp": 600, "input_length": 10, "output_length": -3}]
    bad = RUNNER.invoke(app, [*SERVING, "--workload-trace", str(_trace_file(tmp_path, lines))])
    assert bad.exit_code == 2, bad.output
    assert "--workload-trace line 3.output_length" in bad.output and ">= 1" in bad.output, bad.output
    missing = RUNNER.invoke(app, [*SERVING, "--workload-trace", str(tmp_path / "none.jsonl")])
    assert missing.exit_code == 2 and "--workload-trace" in missing.output, missing.output


def test_the_api_takes_a_trace_as_records_or_jsonl(client: TestClient) -> None:
    c, m = make_cluster(client), make_model(client)
    base = {"cluster_id": c["id"], "model_id": m["id"], "config": {"tp": 1}}
    records = [
        {"arrival_s": x["timestamp"] / 1000, "input_tokens": x["input_length"], "output_tokens": x["output_length"]}
        for x in LINES
    ]
    as_records = ok(
        client.post("/v1/estimates", json={**base, "workload": {"mode": "inference", "workload_trace": records}})
    )
    jsonl = "".join(json.dumps(x) + "\n" for x in LINES)
    as_text = ok(
        client.post("/v1/estimates", json={**base, "workload": {"mode": "inference", "workload_trace": jsonl}})
    )
    assert as_records["load_latency"] == as_text["load_latency"]
    assert as_records["load_latency"]["trace_requests_per_replica"] == 40
    named = {
        "mode": "inference",
        "prompt_len": 300,
        "output_len": 200,
        "concurrency": 8,
        "length_distribution": "sharegpt",
    }
    assert ok(client.post("/v1/estimates", json={**base, "workload": named}))["load_latency"]["e2e"]["p99_s"] > 0
    bad = client.post(
        "/v1/estimates",
        json={
            **base,
            "workload": {"mode": "inference", "workload_trace": jsonl + '{"timestamp": 1, "input_length": 0}\n'},
        },
    )
    assert bad.status_code == 422 and "line 41" in bad.text and "input_length" in bad.text, bad.text
