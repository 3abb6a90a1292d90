"""`meshplan plan ... --export slurm|k8s`: the plan's job on its placement, from the command line."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from typer.testing import CliRunner

from api.cli import app
from tests.optimizer.placement.helpers import ONE_PER_RACK, nvl_pool

RUNNER = CliRunner()
PINS = [w for pin in ("tp=8", "dp=15", "pp=2", "vp=1", "mbs=1", "recompute=none") for w in ("--pin", pin)]


def inventory(tmp_path: Path) -> str:
    path = tmp_path / "gb200.yaml"
    path.write_text(yaml.safe_dump({"name": "gb200", "pools": [nvl_pool(ONE_PER_RACK)]}))
    return str(path)


def plan(tmp_path: Path, *extra: str) -> str:
    args = ["plan", "--model", "llama-3-70b", "--cluster", inventory(tmp_path), "--gbs", "480", "--seq-len", "8192"]
    r = RUNNER.invoke(app, [*args, *PINS, "--time-limit", "20", *extra])
    assert r.exit_code == 0, r.output
    return r.output


def test_plan_export_k8s_json_carries_the_placement_and_the_jobset(tmp_path: Path) -> None:
    doc = json.loads(plan(tmp_path, "--export", "k8s", "--json"))
    placement = doc["placement"]
    assert len(placement["hosts"]) == 60 and any(d.startswith("TP groups") for d in placement["degraded"])
    assert doc["export"]["tool"] == "k8s" and doc["export"]["format"] == "yaml"
    jobset = yaml.safe_load(doc["export"]["content"])
    order = jobset["metadata"]["annotations"]["meshplan/host-order"].split(",")
    assert order == [h["name"] for h in placement["hosts"]] and "nvl-003" not in order


def test_plan_export_slurm_prints_the_placement_and_the_script(tmp_path: Path) -> None:
    out = plan(tmp_path, "--export", "slurm")
    assert "Placement: 60 hosts, 240 ranks" in out and "degraded" in out
    assert "#SBATCH --nodes=60" in out and "srun --ntasks=240 --distribution=arbitrary" in out


def test_a_serving_plan_has_no_job_export(tmp_path: Path) -> None:
    args = ["plan", "--model", "llama-3-8b", "--cluster", "dgx-h100", "--mode", "inference", "--batch", "4"]
    r = RUNNER.invoke(app, [*args, "--prompt-len", "512", "--output-len", "64", "--pin", "tp=4", "--export", "slurm"])
    assert r.exit_code == 2 and "training plan" in r.output
