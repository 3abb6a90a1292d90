"""Slurm and Kubernetes jobs of a plan on its placement: the rank order is the placement's, the launch is the
framework's own export, and the scheduler options and Kueue annotations are the documented ones."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from importlib import resources
from pathlib import Path

import pytest
import yaml

from optimizer.errors import DomainError
from optimizer.exports.job_scripts import (
    KUEUE_PREFERRED,
    KUEUE_REQUIRED,
    KUEUE_SLICE_REQUIRED,
    KUEUE_SLICE_SIZE,
    LEAF_LABEL,
    NVLINK_LABEL,
    export_job,
)
from optimizer.exports.launch import export
from optimizer.placement.place import place
from optimizer.spec.cluster_loading import load_cluster_preset
from optimizer.spec.model_loading import load_model_preset
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import TrainingWorkload
from tests.optimizer.placement.helpers import LAST_RACK, ONE_PER_RACK, nvl_racks

REGISTRY = json.loads((resources.files("optimizer.exports") / "export_options.json").read_text())
MODEL = load_model_preset("llama-3-70b")
W = TrainingWorkload(global_batch_size=480, seq_len=8192)
TP8 = ParallelConfig(tp=8, pp=2, dp=15, sequence_parallel=True, zero_stage=1)


def job(scheduler: str, states: dict[str, str], framework: str = "megatron") -> tuple[object, str, list[str]]:
    cluster = nvl_racks(states, pod_size=32, oversubscription=2.0)
    p = place(cluster, TP8).placement
    e = export_job(scheduler, MODEL, W, TP8, p, cluster, framework=framework, job_name="plan-7")
    assert not set(e.options) - set(REGISTRY[scheduler]["options"]), "undocumented options"
    return p, e.content, e.notes


def test_slurm_script_runs_every_rank_on_its_placed_host_in_rank_order(tmp_path: object) -> None:
    p, script, notes = job("slurm", LAST_RACK)
    sbatch = dict(re.findall(r"^#SBATCH --([a-z-]+)=?(.*)$", script, re.M))
    assert sbatch["nodes"] == "60" and sbatch["ntasks"] == "240" and sbatch["gpus-per-node"] == "4"
    assert sbatch["nodelist"].split(",") == [h.name for h in p.hosts]  # type: ignore[attr-defined]
    assert "srun --ntasks=240 --distribution=arbitrary" in script and "export SLURM_HOSTFILE=" in script
    # run the script's own hostfile loop: one line per rank, rank r on its placed host
    loop = script[script.index("while read -r host ranks") : script.index("\nHOSTS\n") + 6]
    out = subprocess.run(
        ["bash", "-c", "SLURM_HOSTFILE=/dev/stdout\n" + loop], capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == [h for h, _ in p.rank_hosts()]  # type: ignore[attr-defined]
    launcher = script[script.index("cat > meshplan-rank.${SLURM_JOB_ID:-local}.sh") :]
    assert "export RANK=$SLURM_PROCID LOCAL_RANK=$SLURM_LOCALID" in launcher
    assert "exec python pretrain_gpt.py" in launcher and "--tensor-model-parallel-size 8" in launcher
    assert any("torchrun node ranks" in n for n in notes)


def test_slurm_script_of_a_degraded_placement_says_where() -> None:
    _, script, notes = job("slurm", ONE_PER_RACK)
    assert "# degraded: TP groups" in script and any(n.startswith("placement: TP groups") for n in notes)


@pytest.mark.parametrize("framework, entry", [("deepspeed", "ds_config.json"), ("torchtitan", "torchtitan.toml")])
def test_the_launch_is_the_framework_s_own_export(framework: str, entry: str) -> None:
    _, script, _ = job("slurm", LAST_RACK, framework)
    stem, suffix = entry.rsplit(".", 1)
    named = f"{stem}.${{SLURM_JOB_ID:-local}}.{suffix}"  # one per job: two jobs from one directory keep their own
    assert f"cat > {named} <<'MESHPLAN_EOF'" in script and named in script.split("exec python")[1]


@pytest.mark.parametrize("framework", ["megatron", "deepspeed"])
def test_two_jobs_submitted_from_one_directory_keep_their_own_launcher(tmp_path: Path, framework: str) -> None:
    """The batch script run twice in one directory as Slurm runs it (SLURM_JOB_ID set; srun a recorder on PATH):
    each job's rank launcher and configuration are its own files, and its srun runs its own [issue 47 item 1]."""
    _, script, _ = job("slurm", LAST_RACK, framework)
    (tmp_path / "bin").mkdir()
    srun = tmp_path / "bin" / "srun"
    srun.write_text('#!/bin/bash\necho "$@" > "srun.$SLURM_JOB_ID"\n')
    srun.chmod(0o755)
    (tmp_path / "job.sh").write_text(script)
    for job_id in ("101", "102"):
        env = {"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin", "SLURM_JOB_ID": job_id}
        subprocess.run(["bash", "job.sh"], cwd=tmp_path, env=env, check=True, capture_output=True)
    for job_id in ("101", "102"):
        assert (tmp_path / f"srun.{job_id}").read_text().split()[-1] == f"meshplan-rank.{job_id}.sh"
        launcher = (tmp_path / f"meshplan-rank.{job_id}.sh").read_text()
        if framework == "deepspeed":
            assert (tmp_path / f"ds_config.{job_id}.json").is_file()
            assert "--deepspeed_config ds_config.${SLURM_JOB_ID:-local}.json" in launcher
    assert not (tmp_path / "meshplan-rank.sh").exists()


def test_k8s_jobset_keeps_tp_groups_in_a_domain_and_runs_in_the_placement_s_order() -> None:
    p, text, _ = job("k8s", LAST_RACK)
    doc = yaml.safe_load(text)
    assert doc["apiVersion"] == "jobset.x-k8s.io/v1alpha2" and doc["kind"] == "JobSet"
    jobs = doc["spec"]["replicatedJobs"]
    assert doc["spec"]["coordinator"] == {"replicatedJob": jobs[0]["name"], "jobIndex": 0, "podIndex": 0}
    hosts, offsets = [], []
    for rj in jobs:
        spec = rj["template"]["spec"]
        pod = spec["template"]
        ann = pod["metadata"]["annotations"]
        assert ann[KUEUE_REQUIRED] == LEAF_LABEL and KUEUE_PREFERRED not in ann  # one leaf per replicated job
        assert ann[KUEUE_SLICE_REQUIRED] == NVLINK_LABEL and ann[KUEUE_SLICE_SIZE] == "2"  # a TP group: 2 trays
        terms = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        names = terms["nodeSelectorTerms"][0]["matchExpressions"][0]["values"]
        assert spec["parallelism"] == spec["completions"] == len(names) and spec["completionMode"] == "Indexed"
        env = {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"]}
        offsets.append(int(env["NODE_RANK_OFFSET"]))
        assert offsets[-1] == len(hosts)
        hosts += names
        command = pod["spec"]["containers"][0]["command"][2]
        assert "--node-rank=$((NODE_RANK_OFFSET + JOB_COMPLETION_INDEX))" in command
        assert "--nnodes=60 --nproc-per-node=4" in command and "pretrain_gpt.py" in command
        assert pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == 4
    assert hosts == [h.name for h in p.hosts]  # type: ignore[attr-defined]
    assert doc["metadata"]["annotations"]["meshplan/host-order"].split(",") == hosts
    assert len(jobs) == 2  # the two leaf switches, in rank order


def test_k8s_jobset_drops_the_slice_where_fragmentation_split_a_tp_group() -> None:
    _, text, notes = job("k8s", ONE_PER_RACK)
    jobs = yaml.safe_load(text)["spec"]["replicatedJobs"]
    assert all(KUEUE_SLICE_SIZE not in rj["template"]["spec"]["template"]["metadata"]["annotations"] for rj in jobs)
    assert any("no slice constraint" in n for n in notes)


def test_k8s_jobset_of_node_local_tp_groups_needs_no_slice() -> None:
    cluster = load_cluster_preset("dgx-h100:4")
    cfg = ParallelConfig(tp=8, pp=2, dp=2)
    p = place(cluster, cfg).placement
    e = export_job("k8s", MODEL, TrainingWorkload(global_batch_size=64, seq_len=4096), cfg, p, cluster)
    ann = yaml.safe_load(e.content)["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["metadata"]
    assert ann["annotations"] == {KUEUE_REQUIRED: LEAF_LABEL}


def test_an_unknown_scheduler_is_an_error() -> None:
    cluster = load_cluster_preset("dgx-h100:4")
    cfg = ParallelConfig(tp=8, pp=2, dp=2)
    with pytest.raises(DomainError) as exc:
        export_job("pbs", MODEL, W, cfg, place(cluster, cfg).placement, cluster)
    assert exc.value.field == "export"


def test_k8s_notes_give_the_topology_s_level_order_and_the_versions_it_needs() -> None:
    """Kueue reads a Topology's levels top down and refuses a slice level above the pod set's level; the slice
    annotations need Kueue v0.13.0, spec.coordinator JobSet v0.6.0 [issue 47 item 1]."""
    _, _, notes = job("k8s", LAST_RACK)
    (topology,) = [n for n in notes if "Kueue Topology" in n]
    order = [topology.index(k) for k in (LEAF_LABEL, NVLINK_LABEL, "kubernetes.io/hostname")]
    assert order == sorted(order) and "leaf above the NVLink domain" in topology
    assert any("Kueue v0.13.0 or later" in n and "JobSet v0.6.0 or later" in n for n in notes)


def _rank_process(tmp_path: Path, script: str, names: list[str]) -> tuple[list[str], list[str]]:
    """Run the batch script as Slurm would (srun runs the rank launcher once, as task 0; `python` a recorder on
    PATH): the launched process's arguments, and the values it sees of `names`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text('#!/bin/bash\nSLURM_PROCID=0 SLURM_LOCALID=0 bash "${@: -1}"\n')
    show = "".join(f' "${{{n}-unset}}"' for n in names)
    (bin_dir / "python").write_text(f"#!/bin/bash\nprintf '%s\\0' \"$@\" > args\nprintf '%s\\0'{show} > env\n")
    for f in ("srun", "python"):
        (bin_dir / f).chmod(0o755)
    (tmp_path / "job.sh").write_text(script)
    run_env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "SLURM_JOB_ID": "7"}
    subprocess.run(["bash", "job.sh"], cwd=tmp_path, env=run_env, check=True, capture_output=True)
    seen = (tmp_path / "env").read_text().split("\0")[: len(names)]  # printf with no value prints one empty
    return (tmp_path / "args").read_text().split("\0")[:-1], seen


@pytest.mark.parametrize("framework", ["megatron", "deepspeed", "torchtitan"])
def test_each_rank_runs_the_plain_export_with_its_environment(tmp_path: Path, framework: str) -> None:
    """Every variable of the framework export's env reaches every rank's process (Megatron-LM's
    CUDA_DEVICE_MAX_CONNECTIONS=1 with TP > 1: its validate_args refuses to start without it), and the rank runs
    the plain export's arguments or configuration, byte for byte [issue 53]."""
    plain = export(framework, MODEL, W, TP8, "MODEL", framework)
    _, script, _ = job("slurm", LAST_RACK, framework)
    args, seen = _rank_process(tmp_path, script, list(plain.env))
    assert seen == list(plain.env.values())
    if framework == "megatron":
        assert plain.env == {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}
        assert args[0] == "pretrain_gpt.py" and args[1:] == shlex.split(plain.content.replace("\\\n", " "))
    else:
        config = next(tmp_path.glob("ds_config.7.json" if framework == "deepspeed" else "torchtitan.7.toml"))
        assert config.read_text().rstrip("\n") == plain.content.rstrip("\n")
    k8s = yaml.safe_load(job("k8s", LAST_RACK, framework)[1])
    for rj in k8s["spec"]["replicatedJobs"]:
        (container,) = rj["template"]["spec"]["template"]["spec"]["containers"]
        env = {e["name"]: e["value"] for e in container["env"]}
        assert {k: env.get(k) for k in plain.env} == plain.env
        assert plain.content.rstrip("\n") in container["command"][2]
