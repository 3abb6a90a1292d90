"""The `meshplan` command line, run as a real process."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from optimizer.spec.model_loading import load_model_preset

ROOT = Path(__file__).resolve().parents[2]


def meshplan(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "api.cli", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        input=stdin,
        timeout=120,
    )


def words(line: str) -> list[str]:
    """A command line's words, as a shell splits them."""
    return shlex.split(line)


TRAIN = words(
    "estimate --model llama-3-70b --cluster dgx-h100:8 --mode training --gbs 512 --seq-len 4096 "
    "--tp 8 --pp 4 --dp 2 --vp 5 --sp --zero 1 --recompute selective"
)


def test_estimate_json_training() -> None:
    r = meshplan(*TRAIN, "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    for key in ("feasible", "step_time_s", "tokens_per_s", "mfu", "stages", "breakdown"):
        assert key in doc
    assert doc["feasible"] is True
    assert len(doc["stages"]) == 4
    for stage in doc["stages"]:
        assert {"layers", "memory_gb", "time_s"} <= set(stage)
        m = stage["memory_gb"]
        parts = sum(v for k, v in m.items() if k not in ("total", "capacity"))
        assert m["total"] == pytest.approx(parts)
    assert sum(s["layers"] for s in doc["stages"]) == 80


def test_estimate_grad_dtype_and_fp8_recipe() -> None:
    """Issue 13's Megatron-Bridge recipe (Llama-3-70B FP8, seq 8192, tp4 pp8 dp2 vp5) was predicted at 94 GB of
    86: FP8 saved activations now count 1 byte per GEMM input, and --grad-dtype bf16 (Megatron
    --grad-reduce-in-bf16) halves the gradient buffer."""
    recipe = [
        "estimate", "--model", "llama-3-70b", "--cluster", "dgx-h100:8", "--gbs", "128", "--seq-len", "8192",
        "--precision", "fp8", "--tp", "4", "--pp", "8", "--dp", "2", "--vp", "5", "--sp", "--zero", "1", "--json",
    ]  # fmt: skip
    fp32 = json.loads(meshplan(*recipe).stdout)
    bf16 = json.loads(meshplan(*recipe, "--grad-dtype", "bf16").stdout)
    g32, g16 = fp32["stages"][0]["memory_gb"]["gradients"], bf16["stages"][0]["memory_gb"]["gradients"]
    assert g16 == pytest.approx(g32 / 2)
    assert bf16["feasible"] is True
    assert fp32["stages"][0]["memory_gb"]["total"] < 88  # was 94.1 with bf16-sized FP8 activations
    bad = meshplan(*recipe, "--grad-dtype", "fp64")
    assert bad.returncode == 2 and "grad_dtype" in bad.stderr + bad.stdout


def test_estimate_json_infeasible_has_reason() -> None:
    r = meshplan(*words("estimate --model llama-3-70b --cluster dgx-h100 --gbs 8 --seq-len 4096 --tp 8 --json"))
    doc = json.loads(r.stdout)
    assert doc["feasible"] is False and "GB per GPU" in doc["reason"]


def test_estimate_json_inference() -> None:
    r = meshplan(
        *words(
            "estimate --model llama-2-70b --cluster dgx-h100 --mode inference --batch 8 "
            "--prompt-len 2048 --output-len 256 --tp 8 --json"
        )
    )
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["ttft_s"] > 0 and doc["tpot_s"] > 0 and doc["stages"][0]["memory_gb"]["kv_cache"] > 0


def test_table_output() -> None:
    r = meshplan(*TRAIN)
    assert r.returncode == 0
    assert "step time" in r.stdout and "Per-GPU memory" in r.stdout


def test_uneven_layers_per_stage() -> None:
    r = meshplan(
        *words(
            "estimate --model llama-2-70b --cluster dgx-h100:8 --gbs 64 --seq-len 4096 "
            "--tp 8 --pp 4 --dp 2 --layers-per-stage 19,21,21,19 --json"
        )
    )
    assert r.returncode == 0, r.stderr
    assert [s["layers"] for s in json.loads(r.stdout)["stages"]] == [19, 21, 21, 19]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--tp", "3"], "tp=3 does not divide num_attention_heads=64"),
        (["--gbs", "-5"], "workload.global_batch_size"),
        (["--recompute", "some"], "config.recompute"),
        (["--model", "llama-9"], "known: bloom-176b"),
        (["--cluster", "dgx-h900"], "known: dgx-1v, dgx-2, dgx-a100"),
        (["--model", "/nonexistent/config.json"], "does not exist"),
        (["--layers-per-stage", "a,b"], "config.layers_per_stage"),
        (["--offload-layers", "80"], "config.offload_layers: offload_layers=80 must be below"),
        (["--recompute", "full", "--offload-layers", "8"], "cannot run with recompute=full"),
        (["--attention-kernel", "fa4"], "workload.attention_kernel: Input should be 'fa3' or 'fa2'"),
        (["--cluster", "dgx-1v:2"], "workload.precision: bf16 is not supported by V100-SXM2-32GB"),
        (["--cuda-graphs", "all"], "workload.cuda_graphs: Input should be 'none', 'layers' or 'full_iteration'"),
        (["--ep-dispatch", "deepep"], "config.ep_dispatch: ep_dispatch=deepep dispatches over EP ranks"),
        (["--dp", "4", "--zero", "1", "--shard-group", "3"], "config.shard_group: shard_group=3 must divide dp=4"),
        (["--dp", "4", "--shard-group", "2"], "config.shard_group: shard_group=2 shards the ZeRO states"),
        (["--dp", "4", "--zero", "1", "--shard-group", "0"], "config.shard_group"),
        (["--dp", "4", "--zero", "3", "--shard-group", "2", "--shard-scope", "weights"], "not available in megatron"),
    ],
)
def test_bad_input_exits_2_with_one_line(args: list[str], needle: str) -> None:
    base = {"--model": "llama-3-70b", "--cluster": "dgx-h100:2", "--gbs": "64", "--seq-len": "4096"}
    for k, v in zip(args[::2], args[1::2], strict=True):
        base[k] = v
    r = meshplan("estimate", *[x for kv in base.items() for x in kv])
    assert r.returncode == 2
    assert needle in r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_estimate_with_a_shard_group() -> None:
    """torchtitan HSDP, 4 dp replicas x tp 2 per node: the ZeRO-3 states are sharded over 4 ranks, not 16."""
    r = meshplan(
        *words(
            "estimate --model llama-3-8b --cluster dgx-h100:4 --gbs 64 --seq-len 4096 --tp 2 --dp 16 --zero 3 "
            "--framework torchtitan --shard-group 4 --json"
        )
    )
    assert r.returncode == 0, r.stderr
    memory = json.loads(r.stdout)["stages"][0]["memory_gb"]
    model = load_model_preset("llama-3-8b")
    assert memory["optimizer"] == pytest.approx(model.num_layers * model.dense_layer_params / 2 * 12 / 4 / 1e9)


def test_hf_config_file(tmp_path: Path) -> None:
    cfg = tmp_path / "config.json"
    cfg.write_text(
        json.dumps(
            {
                "model_type": "llama",
                "hidden_size": 4096,
                "intermediate_size": 11008,
                "num_hidden_layers": 32,
                "num_attention_heads": 32,
                "vocab_size": 32000,
            }
        )
    )
    r = meshplan("estimate", "--model", str(cfg), *words("--cluster dgx-h100 --gbs 64 --seq-len 2048 --tp 8 --json"))
    assert r.returncode == 0, r.stderr
    cfg.write_text(json.dumps({"model_type": "llama", "hidden_size": 4096}))
    r = meshplan("estimate", "--model", str(cfg), "--cluster", "dgx-h100", "--gbs", "64", "--seq-len", "2048")
    assert r.returncode == 2 and "config.json.num_attention_heads: required field is missing" in r.stderr


def test_import_topo_roundtrip(tmp_path: Path) -> None:
    from tests.optimizer.spec.test_cluster import NVSWITCH_TOPO

    r = meshplan("import-topo", "-", "--gpu", "H100", "--nodes", "2", stdin=NVSWITCH_TOPO)
    assert r.returncode == 0, r.stderr
    path = tmp_path / "c.yaml"
    path.write_text(r.stdout)
    r = meshplan(
        *words("estimate --model llama-3-8b --cluster"),
        str(path),
        *words("--gbs 64 --seq-len 2048 --tp 8 --dp 2 --json"),
    )
    assert r.returncode == 0, r.stderr


def test_listings() -> None:
    assert "H100-SXM-80GB" in meshplan("gpus").stdout
    assert "llama-3.1-405b" in meshplan("models").stdout


def test_plan_cost_objective_and_missing_prices() -> None:
    args = ["plan", "--model", "llama-3-8b", "--gbs", "64", "--seq-len", "4096", "--time-limit", "60"]
    cost = meshplan(*args, "--cluster", "examples/priced-cluster.yaml", "--objective", "cost", "--json")
    assert cost.returncode == 0, cost.stderr
    doc = json.loads(cost.stdout)
    assert doc["status"] == "OPTIMAL" and doc["objective"] == "price_per_step"
    assert doc["price_per_step"] == pytest.approx(doc["objective_value"], rel=1e-6)
    fast = json.loads(meshplan(*args, "--cluster", "examples/priced-cluster.yaml", "--json").stdout)
    assert doc["objective_value"] <= fast["price_per_step"] * (1 + 1e-9)
    missing = meshplan(*args, "--cluster", "dgx-h100:2", "--objective", "cost")
    assert missing.returncode == 2
    assert "workload.objective" in missing.stderr + missing.stdout and "Traceback" not in missing.stderr


def test_estimate_with_a_calibration_and_a_measured_log(tmp_path: Path) -> None:
    """Offline: a calibration file slows the prediction; a log's step time is compared with it [issue 14]."""
    base = ["estimate", "--model", "llama-3-8b", "--cluster", "dgx-h100:2", "--gbs", "64", "--seq-len", "4096"]
    base += ["--tp", "2", "--dp", "8", "--sp", "--zero", "1", "--json"]
    plain = json.loads(meshplan(*base).stdout)
    cal = tmp_path / "cal.yaml"
    cal.write_text("pools:\n  dgx-h100:\n    compute: 0.8\n")
    slow = json.loads(meshplan(*base, "--calibration", str(cal)).stdout)
    assert slow["step_time_s"] > plain["step_time_s"] * 1.1
    log = ROOT / "tests" / "optimizer" / "calibration" / "logs" / "megatron.log"
    out = json.loads(meshplan(*base, "--log", str(log)).stdout)
    assert abs(out["measured"]["step_time_s"] - 5.4365) < 1e-9
    planned = ["plan", "--model", "llama-3-8b", "--cluster", "dgx-h100:2", "--gbs", "64", "--seq-len", "4096"]
    planned += ["--pin", "tp=2", "--pin", "pp=1", "--json", "--time-limit", "30"]
    fast = json.loads(meshplan(*planned).stdout)["plan"]["estimate"]["step_time_s"]
    slow_plan = json.loads(meshplan(*planned, "--calibration", str(cal)).stdout)["plan"]["estimate"]["step_time_s"]
    assert slow_plan > fast * 1.1  # the planner prices with the calibration too
    cal.write_text("pools:\n  dgx-h100:\n    compute: 9\n")
    bad = meshplan(*base, "--calibration", str(cal))
    assert bad.returncode == 2 and "calibration.pools.dgx-h100.compute" in bad.stderr and "Traceback" not in bad.stderr
    empty = tmp_path / "empty.log"
    empty.write_text("nothing\n")
    bad = meshplan(*base, "--log", str(empty))
    assert bad.returncode == 2 and "log" in bad.stderr and "Traceback" not in bad.stderr
