"""The user's trace (optimizer/spec/workload_trace.py, issue 55 §1): the Mooncake / aiperf mooncake_trace lines and
`vllm bench serve --save-detailed` results as those tools write them, read into requests in arrival order; bad
input names the line and the field."""

from __future__ import annotations

import json

import pytest

from optimizer.errors import DomainError
from optimizer.spec.workload import InferenceWorkload
from optimizer.spec.workload_loading import build_inference
from optimizer.spec.workload_trace import TraceRequest, parse_trace

# The two samples of kvcache-ai/Mooncake FAST25-release/README.md, as its trace files hold them (one per line).
MOONCAKE = (
    '{"timestamp": 27482, "input_length": 6955, "output_length": 52, '
    '"hash_ids": [46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 2353, 2354]}\n'
    '{"timestamp": 30535, "input_length": 6472, "output_length": 26, '
    '"hash_ids": [46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 2366]}\n'
)


def test_mooncake_lines() -> None:
    a, b = parse_trace(MOONCAKE)
    assert (a.arrival_s, a.input_tokens, a.output_tokens) == (0.0, 6955, 52)
    assert b.arrival_s == pytest.approx(3.053) and (b.input_tokens, b.output_tokens) == (6472, 26)
    assert a.prefix_blocks[:12] == b.prefix_blocks[:12] and a.prefix_blocks[12] != b.prefix_blocks[12]


def test_aiperf_session_lines_and_order() -> None:
    """aiperf's mooncake_trace adds session_id; lines out of time order are sorted (ties keep the file's order)."""
    text = "\n".join(
        json.dumps(x)
        for x in (
            {"timestamp": 500, "input_length": 10, "output_length": 5, "session_id": "b"},
            {"timestamp": 100, "input_length": 20, "output_length": 6, "session_id": "a"},
            {"timestamp": 500, "input_length": 30, "output_length": 7},
        )
    )
    got = parse_trace(text)
    assert [r.input_tokens for r in got] == [20, 10, 30]
    assert [r.arrival_s for r in got] == [0.0, pytest.approx(0.4), pytest.approx(0.4)]
    assert got[0].session_id == "a" and got[2].session_id is None


def test_vllm_bench_serve_saved_result() -> None:
    """vllm bench serve --save-result --save-detailed: input_lens, output_lens, start_times (perf_counter s), errors
    (a failed request is left out, as the bench leaves it out of its metrics)."""
    result = {
        "duration": 9.0,
        "input_lens": [100, 200, 300],
        "output_lens": [10, 0, 30],
        "start_times": [1000.5, 1000.7, 1001.5],
        "errors": ["", "timeout", ""],
    }
    for text in (json.dumps(result), json.dumps(result, indent=2)):  # one line, or pretty-printed
        got = parse_trace(text)
        assert [(r.arrival_s, r.input_tokens, r.output_tokens) for r in got] == [(0.0, 100, 10), (1.0, 300, 30)]
    untimed = parse_trace(json.dumps({"input_lens": [5, 6], "output_lens": [7, 8]}))
    assert all(r.arrival_s is None for r in untimed) and [r.output_tokens for r in untimed] == [7, 8]


def test_the_projects_own_shape_round_trips() -> None:
    reqs = (
        TraceRequest(arrival_s=0.0, input_tokens=4, output_tokens=2),
        TraceRequest(arrival_s=1.5, input_tokens=9, output_tokens=3),
    )
    text = "\n".join(r.model_dump_json() for r in reqs)
    assert parse_trace(text) == reqs


@pytest.mark.parametrize(
    ("text", "field", "rule"),
    [
        ('{"timestamp": 0, "input_length": 5, "output_length": 3}\n{"timestamp": 1, ', "line 2", "not JSON"),
        ('{"timestamp": 0, "input_length": 5, "output_length": 0}', "line 1.output_length", ">= 1"),
        ('{"timestamp": 0, "input_length": 5.5, "output_length": 2}', "line 1.input_length", "whole number"),
        ('{"timestamp": -1, "input_length": 5, "output_length": 2}', "line 1.timestamp", ">= 0"),
        ('{"timestamp": 0, "messages": [], "output_length": 2}', "line 1.input_length", "not a token count"),
        ('{"timestamp": 0, "input_length": 5, "output_length": 2, "hash_ids": ["x"]}', "line 1.hash_ids", "integer"),
        ('{"arrival_s": 0, "input_tokens": 5, "output_tokens": 2, "colour": 1}', "line 1.colour", "not a field"),
        ('{"prompt": "hi"}', "line 1", "names no known field"),
        ("[1, 2]", "line 1", "JSON object"),
        ('{"input_lens": [1, 2], "output_lens": [3]}', "line 1.output_lens", "one length"),
        ('{"input_lens": [1], "output_lens": [3], "start_times": [1, 2]}', "line 1.start_times", "as long as"),
        (
            '{"timestamp": 0, "input_length": 5, "output_length": 3}\n{"input_length": 5, "output_length": 3}',
            "workload_trace",
            "request 2 differs",
        ),
        ("\n\n", "workload_trace", "no request"),
    ],
)
def test_bad_input_names_the_line_and_the_field(text: str, field: str, rule: str) -> None:
    with pytest.raises(DomainError) as err:
        parse_trace(text)
    assert field in err.value.field and rule in err.value.rule, (err.value.field, err.value.rule)


def test_the_workload_takes_a_trace_as_text_or_records() -> None:
    w = InferenceWorkload.model_validate({"mode": "inference", "workload_trace": MOONCAKE})
    assert (w.prompt_len, w.output_len) == (round((6955 + 6472) / 2), 39)  # unset: the trace's means
    assert w.replays_trace and not w.model_copy(update={"concurrency": 4}).replays_trace
    records = [
        {"arrival_s": 2.0, "input_tokens": 8, "output_tokens": 2},
        {"arrival_s": 1.0, "input_tokens": 4, "output_tokens": 6},
    ]
    w2 = InferenceWorkload.model_validate(
        {"mode": "inference", "prompt_len": 100, "output_len": 10, "workload_trace": records}
    )
    assert [r.input_tokens for r in w2.workload_trace or ()] == [4, 8] and w2.prompt_len == 100
    with pytest.raises(DomainError, match="not both") as err:
        build_inference(workload_trace=MOONCAKE, length_distribution="sharegpt")
    assert err.value.field == "workload.length_distribution"
    with pytest.raises(DomainError) as bad:
        build_inference(workload_trace=[records[0], {"arrival_s": 3.0, "input_tokens": 0, "output_tokens": 1}])
    assert bad.value.field == "workload.workload_trace.1.input_tokens"
    with pytest.raises(DomainError, match="length spread"):
        build_inference(prompt_len=9, output_len=9, length_distribution="sharegpt", output_len_cv=1.0)
