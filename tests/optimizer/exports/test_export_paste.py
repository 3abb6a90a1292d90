"""Every export pasted as it is served (Export.script(): what the CLI prints and the plan page's Copy button copies)
arrives whole: bash parses it (`bash -n`), the launcher gets every flag and every value (a bash function in its
place prints its argv), the environment reaches the launched process, and JSON / TOML / YAML documents parse."""

from __future__ import annotations

import json
import subprocess
import tempfile
import tomllib
from pathlib import Path

import pytest
import yaml

from optimizer.exports.job_scripts import export_job
from optimizer.exports.launch import Export, export, megatron_layout, moe_layer_pattern
from optimizer.placement.place import place
from optimizer.spec.model_loading import load_model_preset
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import InferenceWorkload, TrainingWorkload
from tests.optimizer.exports.test_job_scripts import MODEL as JOB_MODEL
from tests.optimizer.exports.test_job_scripts import TP8
from tests.optimizer.exports.test_job_scripts import W as JOB_W
from tests.optimizer.helpers import megatron_interleaved
from tests.optimizer.placement.helpers import ONE_PER_RACK, nvl_racks
from tests.optimizer.spec.test_recompute_modules import DS_RECIPE, W_DS

LLAMA = load_model_preset("llama-3.1-405b")
W = TrainingWorkload(global_batch_size=2048, seq_len=8192)
# 126 layers on 16 ranks x 4 virtual stages, uneven: a 64-stage --pipeline-model-parallel-layout of ~260
# characters, longer than the 150 columns rich wrapped the CLI's output at.
LONG = megatron_interleaved(tp=8, pp=16, dp=16, vp=4, layers_per_stage=[6] + [8] * 15)


def argv(script: str, launcher: str, env: tuple[str, ...] = (), cwd: Path | None = None) -> list[str]:
    """Run `script` in bash (in `cwd`, or a scratch directory) with `launcher` a function printing its arguments
    (NUL-separated), then each of `env` as the launched process sees it; `bash -n` first, so a syntax error fails
    here and not in a half-run."""
    syntax = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True, check=False)
    assert syntax.returncode == 0, syntax.stderr
    show_env = "".join(f' "$(printenv {name})"' for name in env)
    prelude = f"{launcher}() {{ printf '%s\\0' \"$@\"{show_env}; }}\n"
    with tempfile.TemporaryDirectory() as scratch:
        run = subprocess.run(
            ["bash", "-c", prelude + script], cwd=cwd or scratch, capture_output=True, text=True, check=False
        )
    assert run.returncode == 0 and not run.stderr, run.stderr  # e.g. "E,t|t|...: command not found"
    return run.stdout.split("\0")[:-1]


def after_launcher(script: str, launcher: str) -> str:
    """A Megatron export pasted as its README says: its `export NAME=value` lines, then the launcher with the
    arguments after it."""
    lines = script.split("\n")
    first = next(i for i, line in enumerate(lines) if not line.startswith("export "))
    lines[first] = f"{launcher} {lines[first]}"
    return "\n".join(lines)


def flag_values(args: list[str]) -> dict[str, list[str]]:
    """Each flag with the words after it up to the next flag (store-true flags get none, nargs '+' several)."""
    out: dict[str, list[str]] = {}
    current = ""
    for a in args:
        if a.startswith("--"):
            assert a not in out, f"{a} twice"
            current = a
            out[a] = []
        else:
            assert current, f"{a!r} before any flag"
            out[current].append(a)
    return out


def test_script_is_the_environment_then_the_content() -> None:
    e = Export(tool="vllm", format="args", content="vllm serve M \\\n  --x 1", options=["--x"], env={"A": "1 2"})
    assert e.script() == "export A='1 2'\nvllm serve M \\\n  --x 1\n"
    assert Export(tool="torchtitan", format="toml", content="[a]\n", options=[]).script() == "[a]\n"


@pytest.mark.parametrize("case", ["long-layout", "deepseek-v3"])
def test_megatron_export_reaches_the_launcher_whole(case: str) -> None:
    if case == "long-layout":
        model, w, cfg = LLAMA, W, LONG
        layout = megatron_layout([6] + [8] * 15, 4)
        assert len(layout) > 150 and layout.count("|") == 63
    else:  # a given layout with parentheses and '*', a list-expression value, nargs '+' values
        model, w = load_model_preset("deepseek-v3"), W_DS
        cfg = DS_RECIPE.model_copy(update={"recompute": "selective", "recompute_modules": ("mla_up_proj", "mlp")})
        layout = "Et|(tt|)*30L"
    e = export("megatron", model, w, cfg)
    # the pasted text: the environment Megatron's validate_args requires (tp > 1), then the launcher and its arguments
    assert e.env == {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}
    got = argv(e.script().replace(e.content, "pretrain_gpt " + e.content), "pretrain_gpt", env=tuple(e.env))
    assert got[-1] == "1"  # the launched process sees CUDA_DEVICE_MAX_CONNECTIONS=1
    flags = flag_values(got[:-1])
    assert list(flags) == [o for o in e.options if o.startswith("--")]  # every flag, in order, none split off
    assert flags["--pipeline-model-parallel-layout"] == [layout]
    assert flags["--tensor-model-parallel-size"] == [str(cfg.tp)]
    assert flags["--pipeline-model-parallel-size"] == [str(cfg.pp)]
    assert flags["--global-batch-size"] == [str(w.global_batch_size)]
    assert flags["--num-layers"] == [str(model.num_layers)] and flags["--bf16"] == []
    if case == "deepseek-v3":
        assert flags["--moe-layer-freq"] == [moe_layer_pattern(model)]
        assert flags["--recompute-modules"] == ["mla_up_proj", "mlp"]


def test_deepspeed_and_torchtitan_documents_parse_as_pasted() -> None:
    ds = export("deepspeed", LLAMA, W, ParallelConfig(tp=8, pp=1, dp=8, zero_stage=3, recompute="full", mbs=2))
    doc = json.loads(ds.script())
    assert doc["train_batch_size"] == 2048 and doc["zero_optimization"]["stage"] == 3
    titan = export("torchtitan", LLAMA, W, LONG)
    parts = tomllib.loads(titan.script())["parallelism"]["module_fqns_per_model_part"]
    assert len(parts) == 64 and parts[0][0] == "tok_embeddings" and parts[-1][-2:] == ["norm", "output"]
    assert sum(len(p) for p in parts) == LLAMA.num_layers + 3


def test_serving_exports_reach_the_engine_whole(tmp_path: Path) -> None:
    wi = InferenceWorkload(prompt_len=2048, output_len=256, batch=8, precision="fp8", kv_cache_dtype="fp8")
    split = [3, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 2]
    vllm = export("vllm", LLAMA, wi, ParallelConfig(tp=8, pp=32, layers_per_stage=split), model_ref="meta/llama")
    got = argv(vllm.script(), "vllm", env=("VLLM_PP_LAYER_PARTITION",))
    assert got[:2] == ["serve", "meta/llama"] and got[-1] == ",".join(map(str, split))
    assert flag_values(got[2:-1])["--pipeline-parallel-size"] == ["32"]
    ds = load_model_preset("deepseek-v3")
    sglang = export("sglang", ds, wi, ParallelConfig(tp=8, pp=2, ep=8, layers_per_stage=[28, 33]))
    got = argv(sglang.script(), "python")
    assert got[:2] == ["-m", "sglang.launch_server"]
    flags = flag_values(got[2:])
    assert list(flags) == sglang.options and flags["--ep-size"] == ["8"] and flags["--kv-cache-dtype"] == ["fp8_e4m3"]
    trt = export("trtllm", LLAMA, wi, ParallelConfig(tp=8, pp=2, dp=2))
    got = argv(trt.script(), "trtllm-serve", cwd=tmp_path)
    flags = flag_values(got[1:])
    assert got[0] == "MODEL" and flags["--tp_size"] == ["16"] and flags["--extra_llm_api_options"] == ["extra.yml"]
    # the options file the launch names is written by the pasted text itself
    assert yaml.safe_load((tmp_path / "extra.yml").read_text()) == {
        "kv_cache_config": {"dtype": "fp8"},
        "enable_attention_dp": True,
    }


def test_job_exports_parse_as_pasted() -> None:
    cluster = nvl_racks(ONE_PER_RACK, pod_size=32, oversubscription=2.0)
    p = place(cluster, TP8).placement
    slurm = export_job("slurm", JOB_MODEL, JOB_W, TP8, p, cluster, framework="megatron", job_name="plan-7")
    syntax = subprocess.run(["bash", "-n"], input=slurm.script(), capture_output=True, text=True, check=False)
    assert syntax.returncode == 0, syntax.stderr
    k8s = export_job("k8s", JOB_MODEL, JOB_W, TP8, p, cluster, framework="megatron", job_name="plan-7")
    assert yaml.safe_load(k8s.script())["kind"] == "JobSet"
