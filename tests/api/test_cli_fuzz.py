"""Bad command lines never reach a traceback: every one of 320 generated invocations exits 2 with a message
(issue 16: 28 of 342 fuzzed invocations ended in a traceback). In-process (typer's runner) to keep it fast."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from api.cli import app
from tests.api.helpers import LLAMA_HF

RUNNER = CliRunner()
LLAMA = LLAMA_HF


@pytest.fixture(scope="module")
def bad_files(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    d = tmp_path_factory.mktemp("bad")
    files = {
        "latin1.yaml": "name: caf\xe9\n".encode("latin-1"),
        "deep.yaml": ("a: " + "[" * 900 + "]" * 900).encode(),
        "deep.json": ("[" * 5000 + "]" * 5000).encode(),
        "bigint.yaml": ("num_layers: " + "9" * 5000 + "\n").encode(),
        "bigint.json": json.dumps(LLAMA).replace("32000", "9" * 5000).encode(),
        "act.json": json.dumps({**LLAMA, "hidden_act": 5}).encode(),
        "embd.json": json.dumps(
            {"model_type": "gpt2", "n_layer": 2, "n_embd": {}, "n_head": 2, "vocab_size": 9}
        ).encode(),
        "pdrop.json": json.dumps(
            {"model_type": "gpt2", "n_layer": 2, "n_embd": 8, "n_head": 2, "vocab_size": 9, "resid_pdrop": "high"}
        ).encode(),
        "moe.json": json.dumps({**LLAMA, "model_type": "qwen2_moe", "num_experts": 4, "mlp_only_layers": 3}).encode(),
        "list.yaml": b"- 1\n- 2\n",
        "empty.yaml": b"",
        "pools.yaml": b"pools: 7\n",
        "nodes.yaml": (
            "pools:\n  - {name: p, gpu: H100-SXM-80GB, gpus_per_node: 8, nodes: " + "9" * 5000 + "}\n"
        ).encode(),
    }
    out = []
    for name, data in files.items():
        p = Path(d) / name
        p.write_bytes(data)
        out.append(str(p))
    return out


def _models(files: list[str]) -> st.SearchStrategy[str]:
    return st.sampled_from(["llama-3-8b", "nope-model", "", *files])


def _clusters(files: list[str]) -> st.SearchStrategy[str]:
    return st.sampled_from(
        ["dgx-h100:2", "dgx-h100:\u00b2", "dgx-h100:" + "9" * 5000, "dgx-h100:0", "dgx-h100:-1", "zzz", *files]
    )


INTS = st.sampled_from(["0", "-3", "1.5", "abc", "9" * 5000, "\u00b2", "64"])
PINS = st.sampled_from(
    ["tp=" + "9" * 5000, "zero=9", "tp=\u00b2", "pp<=x", "schedule=nope", "sp=maybe", "tp=8,tp=4", "bogus=1", "tp"]
)


@settings(max_examples=320, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_bad_invocations_exit_2_without_a_traceback(bad_files: list[str], data: st.DataObject) -> None:
    command = data.draw(st.sampled_from(["plan", "estimate"]))
    model = data.draw(_models(bad_files))
    cluster = data.draw(_clusters(bad_files))
    args = [command, "--model", model, "--cluster", cluster, "--gbs", data.draw(INTS), "--seq-len", data.draw(INTS)]
    if command == "plan":
        args += ["--pin", data.draw(PINS), "--time-limit", "2"]
    else:
        args += ["--tp", data.draw(INTS)]
    good = model == "llama-3-8b" and cluster == "dgx-h100:2"
    if good and all(a == "64" for a in args[6:9:2]):
        return  # every part valid: not a bad invocation
    result = RUNNER.invoke(app, args)
    assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit), (
        args[:4],
        repr(result.exception)[:300],
    )
    assert "Traceback" not in result.output, (args[:4], result.output[-500:])
    assert result.exit_code == 2, (args[:4], result.exit_code, result.output[-300:])


USAGE_ERRORS = [
    ["plan", "--model", "llama-3-8b", "--cluster", "dgx-h100:2", "--gbs", "abc", "--seq-len", "8"],
    ["estimate", "--model", "llama-3-8b", "--cluster", "dgx-h100:2", "--gbs", "8", "--seq-len", "1.5"],
    ["plan", "--bogus"],
    ["plan", "--model"],
    ["serve", "--port", "abc"],
    ["serve", "--workers", "0"],
    ["token", "revoke", "x"],
    ["token", "create"],
    ["token"],
    ["measure", "0"],
    ["measure", "1", "--warmup", "-1"],
    ["sync", "abc"],
    ["watch", "1", "2", "--gbs", "\u00b2"],
    ["import-topo"],
    ["nope"],
]


@pytest.mark.parametrize("args", USAGE_ERRORS, ids=lambda a: " ".join(a)[:40])
def test_option_type_errors_are_one_line_and_exit_2(args: list[str]) -> None:
    """Click's usage errors (a wrong type, out of range, missing or unknown) print one line, not a usage box."""
    result = RUNNER.invoke(app, args)
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2, (args, result.exit_code, result.output)
    assert len(lines) == 1 and lines[0].startswith("error: "), (args, result.output)
    assert "\u256d" not in result.output and "Traceback" not in result.output


TYPED_OPTIONS = [  # (command line before the option, option, type)
    (["plan", "--model", "llama-3-8b", "--cluster", "dgx-h100:2"], "--gbs", int),
    (["plan", "--model", "llama-3-8b", "--cluster", "dgx-h100:2"], "--time-limit", float),
    (["plan", "--model", "llama-3-8b", "--cluster", "dgx-h100:2"], "--max-gpus", int),
    (["estimate", "--model", "llama-3-8b", "--cluster", "dgx-h100:2"], "--tp", int),
    (["import-topo", "-", "--gpu", "H100-SXM-80GB"], "--nic-gbps", float),
    (["serve"], "--port", int),
    (["serve"], "--workers", int),
    (["worker"], "--concurrency", int),
    (["measure", "1"], "--step-time", float),
    (["next-measurement", "1"], "--top", int),
    (["watch", "1", "2", "--name", "w", "--seq-len", "8"], "--gbs", int),
    (["token", "revoke"], "", int),
]
NOT_INT = st.sampled_from(["abc", "1.5", "\u00b2", "", "0x10", "1e3", "9" * 5000 + "x", "--", "\u0663"])
NOT_FLOAT = st.sampled_from(["abc", "\u00b2", "", "1,5", "nan?", "1e", "0x1p"])


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_option_type_errors_from_generated_values_are_one_line(data: st.DataObject) -> None:
    """Any value of the wrong type for a typed option (never a valid one: nothing is started) is one line, exit 2."""
    head, option, kind = data.draw(st.sampled_from(TYPED_OPTIONS))
    value = data.draw(NOT_INT if kind is int else NOT_FLOAT)
    args = [*head, *([option] if option else []), value]
    result = RUNNER.invoke(app, args)
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2, (args[-3:], result.exit_code, result.output[-300:], result.exception)
    assert len(lines) == 1 and lines[0].startswith("error: "), (args[-3:], result.output[-300:])
