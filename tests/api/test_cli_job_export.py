"""`meshplan plan ... --export slurm|k8s`: the plan's job on its placement, from the command line."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner

from api.cli import app
from tests.optimizer.placement.helpers import ONE_PER_RACK, nvl_pool
from tests.slurm_cluster import SlurmCluster

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


# `--output FILE` / `--output -`: the export a scheduler takes as printed [issue 47 item 1]
ONE_NODE = {
    "name": "lab",
    "pools": [
        {
            "name": "gpu",
            "gpu": "H100-SXM-80GB",
            "gpus_per_node": 8,
            "intra_node": {"kind": "nvlink", "gbytes_per_s": 450},
            "inter_node": {"nics_per_node": 8, "gbits_per_s": 400},
            "nodes": [{"name": "gpu01", "switches": ["leaf1", "spine"]}],
        }
    ],
}
SMALL = ["plan", "--model", "llama-3-8b", "--gbs", "8", "--seq-len", "2048", "--pin", "tp=8", "--time-limit", "10"]


def small_plan(tmp_path: Path, *extra: str) -> Any:
    path = tmp_path / "lab.yaml"
    path.write_text(yaml.safe_dump(ONE_NODE))
    return RUNNER.invoke(app, [*SMALL, "--cluster", str(path), *extra])


def test_output_file_holds_exactly_the_script_sbatch_takes(tmp_path: Path, slurm: SlurmCluster) -> None:
    script = tmp_path / "job.sbatch"
    r = small_plan(tmp_path, "--export", "slurm", "--output", str(script))
    assert r.exit_code == 0, r.output
    text = script.read_text()
    assert text.startswith("#!/bin/bash\n#SBATCH --job-name=") and "#SBATCH --nodelist=gpu01" in text
    assert "note:" in r.stdout and "note:" not in text and "#!/bin/bash" not in r.stdout  # the report apart
    assert f"wrote the slurm export to {script}" in r.stderr
    # Debian's sbatch against the suite's controller: a batch script it accepts (--test-only submits nothing)
    sbatch = subprocess.run(
        ["sbatch", "--test-only", str(script)], env=slurm.env(), cwd=tmp_path, capture_output=True, text=True
    )
    assert sbatch.returncode == 0 and "does not look like a batch script" not in sbatch.stderr, sbatch.stderr
    assert "gpu01" in sbatch.stderr, sbatch.stderr  # "Job N to start at ... on nodes gpu01 in partition gpu"


def test_output_dash_prints_the_bare_jobset_on_stdout(tmp_path: Path) -> None:
    r = small_plan(tmp_path, "--export", "k8s", "--output", "-")
    assert r.exit_code == 0, r.output
    assert "Placement" in r.stderr and "note:" in r.stderr  # the report and the notes on stderr
    assert not jobset_shape_errors(yaml.safe_load(r.stdout)), jobset_shape_errors(yaml.safe_load(r.stdout))


def jobset_shape_errors(doc: Any) -> list[str]:
    """What a JobSet v1alpha2 object needs, as its CRD's schema states it [kubernetes-sigs/jobset
    api/jobset/v1alpha2/jobset_types.go: replicatedJobs[].name (DNS-1123 label), replicas, template a JobTemplateSpec;
    coordinator naming one of the replicated jobs], and the batch/v1 Job template underneath (containers with a
    name and an image). kubectl apply --dry-run=client is not available here."""
    dns = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    errors: list[str] = []
    if doc.get("apiVersion") != "jobset.x-k8s.io/v1alpha2" or doc.get("kind") != "JobSet":
        errors.append("apiVersion/kind")
    if not dns.match(str(doc.get("metadata", {}).get("name", ""))):
        errors.append("metadata.name")
    jobs = doc.get("spec", {}).get("replicatedJobs")
    if not isinstance(jobs, list) or not jobs:
        return [*errors, "spec.replicatedJobs"]
    for k, job in enumerate(jobs):
        where = f"spec.replicatedJobs[{k}]"
        if not dns.match(str(job.get("name", ""))) or not isinstance(job.get("replicas"), int):
            errors.append(f"{where}.name/replicas")
        spec = job.get("template", {}).get("spec", {})
        if spec.get("completionMode") == "Indexed" and spec.get("completions") != spec.get("parallelism"):
            errors.append(f"{where}: completions != parallelism")
        containers = spec.get("template", {}).get("spec", {}).get("containers")
        if not containers or not all(c.get("name") and c.get("image") for c in containers):
            errors.append(f"{where}.template.spec.template.spec.containers")
    coordinator = doc["spec"].get("coordinator", {}).get("replicatedJob")
    if coordinator not in {j.get("name") for j in jobs}:
        errors.append("spec.coordinator.replicatedJob")
    return errors


def test_output_refuses_what_it_cannot_write(tmp_path: Path) -> None:
    for extra, message in (
        (["--output", "x.sh"], "give --export too"),
        (["--export", "slurm", "--output", "-", "--json"], "drop --json"),
        (["--export", "slurm", "--output", str(tmp_path)], "cannot write"),
    ):
        r = small_plan(tmp_path, *extra)
        assert r.exit_code == 2 and r.output.startswith("error: --output:") and message in r.output, r.output
