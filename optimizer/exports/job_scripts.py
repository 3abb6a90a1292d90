"""A training plan submitted on its placement's hosts: a Slurm batch script or a Kubernetes JobSet for Kueue, each
running the framework launch that optimizer/exports/launch.py writes, with the placement's rank order.

Slurm: sbatch allocates exactly the placed hosts (`--nodelist`), and the job step lays one task per rank on them in
rank order: `srun --distribution=arbitrary` places task r on line r of the file SLURM_HOSTFILE names [SchedMD/slurm
doc/man/man1/srun.1, -m arbitrary: "allocate processes in-order as listed in file designated by the environment
variable SLURM_HOSTFILE ... meant primarily to control a job step's task layout in an existing job allocation";
commit 284c3b95, read 2026-11-25]. Each task exports RANK = SLURM_PROCID and LOCAL_RANK = SLURM_LOCALID, which
Megatron and torch.distributed read [Megatron-LM megatron/training/arguments.py: args.rank = RANK, args.world_size
= WORLD_SIZE; common_config.py local_rank = LOCAL_RANK; d98e8a6].

Kubernetes: a JobSet [kubernetes-sigs/jobset api/jobset/v1alpha2/jobset_types.go, 08dfbdf] with one indexed Job
per run of consecutive hosts under one leaf switch, one pod per host (all its GPUs), node rank = the run's first
node rank + the pod's completion index, torchrun's static rendezvous at the JobSet's coordinator pod (node rank 0).
Kueue's topology-aware scheduling keeps each run under one leaf (`kueue.x-k8s.io/podset-required-topology`) and each
TP group's pods in one NVLink domain (`podset-slice-required-topology` with `podset-slice-size` pods) [kubernetes-
sigs/kueue apis/kueue/v1beta2/topology_types.go, site docs tasks/run/jobsets.md 'Sliced placement'; ff69552]; a
required node affinity keeps the pods on the placed hosts (Kueue's TAS honours it: pkg/cache/scheduler/
tas_flavor_snapshot.go RequiredDuringSchedulingIgnoredDuringExecution). Kueue assigns consecutive pod indices to a
slice's domain (rank-based ordering, pkg/controller/tas/topology_ungater.go), so which placed host of a run gets
which index is Kueue's choice within those constraints; torchrun numbers ranks by node rank and each node's local
ranks [torch/distributed/elastic/agent/server/api.py _assign_worker_ranks: base global rank = the sum of the
local world sizes of the lower node ranks]."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any

import yaml

from optimizer.costmodel.result import Estimate
from optimizer.errors import DomainError, UnknownNameError
from optimizer.exports.launch import Export, export
from optimizer.placement.result import PlacedHost, Placement
from optimizer.spec.cluster_spec import ClusterSpec
from optimizer.spec.model_spec import ModelSpec
from optimizer.spec.names import AUTO_PRICED_AS, FRAMEWORKS, SCHEDULERS, FrameworkName, named_framework
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import TrainingWorkload

# Kueue TAS pod-template annotations [kueue apis/kueue/v1beta2/topology_types.go].
KUEUE_REQUIRED = "kueue.x-k8s.io/podset-required-topology"
KUEUE_PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
KUEUE_SLICE_REQUIRED = "kueue.x-k8s.io/podset-slice-required-topology"
KUEUE_SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"
KUEUE_QUEUE = "kueue.x-k8s.io/queue-name"
# The oldest releases that read what the manifest uses: Kueue's podset-slice-required-topology and
# podset-slice-size annotations came in v0.13.0 [kueue d449c3f765 "Add PodSet Slice API", first tag v0.13.0;
# podset-required-topology is older: 587a6fc6f8 "TAS API", v0.9.0]; JobSet's spec.coordinator in v0.6.0 [jobset
# 95fc11bd "initial commit for coordinator support", first tag v0.6.0]. Kueue orders a Topology's levels top down and
# refuses a slice level above the pod set's required level ("podset slice topology %s is above the podset topology
# %s", pkg/cache/scheduler/tas_flavor_snapshot.go at ff69552) [issue 47 item 1].
KUEUE_MIN_VERSION = "v0.13.0"
JOBSET_MIN_VERSION = "v0.6.0"
# A Workload holds at most 18 PodSets (one per replicated Job) [kueue workload_types.go podSets MaxItems=18].
KUEUE_MAX_PODSETS = 18
# Node labels Topograph writes: the switch closest to the node (tier 0: the leaf) and the accelerator (NVLink)
# domain [NVIDIA/topograph docs/reference/node-labels.md, e2b6250]; the Kueue Topology must list them as levels.
LEAF_LABEL = "fabric.topograph.run/tier-0"
NVLINK_LABEL = "accelerator.topograph.run/domain"
HOSTNAME_LABEL = "kubernetes.io/hostname"
# torchrun's default rendezvous port [torch.distributed.run --master-port default 29500].
MASTER_PORT = 29500
# The PyTorch container the frameworks' own recipes start from; set --image for one with the framework installed.
DEFAULT_IMAGE = "nvcr.io/nvidia/pytorch:25.09-py3"


@dataclass(frozen=True, slots=True)
class Launch:
    """How one rank (or one node's ranks under torchrun) starts the framework."""

    files: tuple[tuple[str, str], ...]
    """Config files written first: (name, content)."""
    entry: str
    """What python (or torchrun) runs: a script or '-m module'."""
    args: str
    """Its arguments (may span lines, joined by backslash-newline)."""
    env: tuple[tuple[str, str], ...] = ()
    """The environment the framework's export requires (Export.env: Megatron-LM's CUDA_DEVICE_MAX_CONNECTIONS),
    set in every rank's process."""


def framework_launch(
    fw: FrameworkName,
    model: ModelSpec,
    w: TrainingWorkload,
    c: ParallelConfig,
    model_ref: str,
    estimate: Estimate | None,
) -> tuple[Launch, Export]:
    """The framework's export (launch.py) as a launch: Megatron-LM's pretrain_gpt.py with the export's arguments;
    a DeepSpeed training script (TRAIN_SCRIPT) reading the exported ds_config.json; torchtitan's trainer reading the
    exported TOML [pytorch/torchtitan run_train.sh before 9810191b: -m torchtitan.train --job.config_file]."""
    inner = export(fw, model, w, c, model_ref, fw, estimate=estimate)
    env = tuple(inner.env.items())
    if fw == "megatron":
        return Launch((), "pretrain_gpt.py", inner.content, env), inner
    if fw == "deepspeed":
        launch = Launch(
            (("ds_config.json", inner.content),),
            '"${TRAIN_SCRIPT:-train.py}"',
            "--deepspeed --deepspeed_config ds_config.json",
            env,
        )
        return launch, inner
    return Launch(
        (("torchtitan.toml", inner.content),), "-m torchtitan.train", "--job.config_file torchtitan.toml", env
    ), inner


# What a file the batch script writes into the submission directory is named by: the job's id, so that two jobs
# submitted from one directory never overwrite each other's launcher or configuration (sbatch sets SLURM_JOB_ID in
# the batch script and srun passes it to every task [sbatch(1), srun(1) OUTPUT ENVIRONMENT VARIABLES]) [issue 47].
SLURM_JOB_TAG = "${SLURM_JOB_ID:-local}"


def _per_job(name: str) -> str:
    """`ds_config.json` -> `ds_config.${SLURM_JOB_ID:-local}.json`."""
    stem, dot, suffix = name.rpartition(".")
    return f"{stem}.{SLURM_JOB_TAG}.{suffix}" if dot else f"{name}.{SLURM_JOB_TAG}"


def _slurm_launch(launch: Launch) -> Launch:
    """The launch with its configuration files named by the job's id (in the files and in the arguments)."""
    files, entry, args = [], launch.entry, launch.args
    for name, content in launch.files:
        files.append((_per_job(name), content))
        entry, args = entry.replace(name, _per_job(name)), args.replace(name, _per_job(name))
    return Launch(tuple(files), entry, args, launch.env)


def _env_lines(launch: Launch) -> list[str]:
    """`export NAME=value` (value shell-quoted) for each variable the framework's export requires."""
    return [f"export {k}={shlex.quote(v)}" for k, v in launch.env]


def _heredocs(files: tuple[tuple[str, str], ...]) -> list[str]:
    out = []
    for name, content in files:
        out += [f"cat > {name} <<'MESHPLAN_EOF'", content.rstrip("\n"), "MESHPLAN_EOF"]
    return out


def _summary(p: Placement) -> list[str]:
    """Comment lines: the hosts by leaf switch, the TP groups' NVLink domains, the shortfalls."""
    leaves: dict[str, int] = {}
    for h in p.hosts:
        leaves[h.leaf] = leaves.get(h.leaf, 0) + 1
    split = sum(1 for d in p.tp_domains if " + " in d)
    lines = [
        f"# meshplan placement: {len(p.hosts)} hosts, {p.world_size} ranks (tp {p.tp}, {p.gpus_per_stage} per "
        "pipeline stage), rank order = host order below",
        "# hosts per leaf switch: " + ", ".join(f"{k} {v}" for k, v in leaves.items()),
        f"# TP groups: {len(p.tp_domains)}, {split} split across NVLink domains",
    ]
    lines += [f"# degraded: {d}" for d in p.degraded]
    return lines


def _uniform_gpus(hosts: list[PlacedHost], gpus_per_host: dict[str, int]) -> int | None:
    counts = {gpus_per_host[h.pool] for h in hosts}
    return counts.pop() if len(counts) == 1 else None


def slurm_script(
    name: str, p: Placement, launch: Launch, gpus_per_host: dict[str, int]
) -> tuple[str, list[str], list[str]]:
    """(the sbatch script, the options it uses, notes)."""
    hosts = p.hosts
    gpus = _uniform_gpus(hosts, gpus_per_host)
    launch = _slurm_launch(launch)
    rank_script = _per_job("meshplan-rank.sh")
    options = ["--job-name", "--nodes", "--nodelist", "--ntasks", "--exclusive"]
    lines = [
        "#!/bin/bash",
        f"#SBATCH --job-name={name}",
        f"#SBATCH --nodes={len(hosts)}",
        f"#SBATCH --nodelist={','.join(h.name for h in hosts)}",
        f"#SBATCH --ntasks={p.world_size}",
    ]
    if gpus is not None:
        lines.append(f"#SBATCH --gpus-per-node={gpus}")
        options.append("--gpus-per-node")
    lines += ["#SBATCH --exclusive", *_summary(p), "set -euo pipefail", ""]
    lines += [
        f"export MASTER_ADDR={hosts[0].name} MASTER_PORT={MASTER_PORT} WORLD_SIZE={p.world_size}",
        "# One line per rank, in rank order: srun --distribution=arbitrary runs task r on line r's host.",
        "# Each host below runs as many consecutive ranks as its count, on its GPUs 0, 1, ...",
        'export SLURM_HOSTFILE="$PWD/meshplan-hosts.${SLURM_JOB_ID:-local}"',
        "while read -r host ranks; do",
        '  for ((i = 0; i < ranks; i++)); do echo "$host"; done',
        "done > \"$SLURM_HOSTFILE\" <<'HOSTS'",
        *(f"{h.name} {h.ranks}" for h in hosts),
        "HOSTS",
        *_heredocs(launch.files),
        f"cat > {rank_script} <<'MESHPLAN_EOF'",
        "#!/bin/bash",
        "export RANK=$SLURM_PROCID LOCAL_RANK=$SLURM_LOCALID",
        *_env_lines(launch),
        f"exec python {launch.entry} \\\n  {launch.args}",
        "MESHPLAN_EOF",
        f"srun --ntasks={p.world_size} --distribution=arbitrary --cpu-bind=none bash {rank_script}",
        "",
    ]
    options += ["SLURM_HOSTFILE", "srun --ntasks", "srun --distribution=arbitrary", "srun --cpu-bind"]
    notes = [
        f"torchrun node ranks are the host order (node rank k = the k-th host: {hosts[0].name} = 0"
        + (f", {hosts[1].name} = 1, ..." if len(hosts) > 1 else "")
        + "); one task per host (SLURM_HOSTFILE listing each host once, srun --ntasks-per-node=1) can run "
        "torchrun --node-rank=$SLURM_PROCID instead"
    ]
    if gpus is None:
        notes.append("the pools have different GPUs per node: request them per node with --gres on each pool")
    if p.idle_gpus:
        notes.append(f"{p.idle_gpus} GPUs of the allocated hosts run no rank")
    return "\n".join(lines), options, notes


@dataclass(frozen=True, slots=True)
class _Run:
    """Consecutive hosts in node-rank order under one leaf, of one pool, each running the same number of ranks."""

    hosts: list[PlacedHost]
    first_node_rank: int

    @property
    def one_leaf(self) -> bool:
        return len({h.leaf for h in self.hosts}) == 1


def _runs(hosts: list[PlacedHost], by_leaf: bool) -> list[_Run]:
    out: list[_Run] = []
    for k, h in enumerate(hosts):
        last = out[-1].hosts[-1] if out else None
        same = (
            last is not None and last.pool == h.pool and last.ranks == h.ranks and (not by_leaf or last.leaf == h.leaf)
        )
        if same:
            out[-1].hosts.append(h)
        else:
            out.append(_Run([h], k))
    return out


class _Literal(str):
    """A string YAML writes as a block (|)."""


def _literal(dumper: yaml.SafeDumper, data: _Literal) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", str(data), style="|")


class _Dumper(yaml.SafeDumper):
    pass


_Dumper.add_representer(_Literal, _literal)


def jobset_manifest(
    name: str,
    p: Placement,
    launch: Launch,
    gpus_per_host: dict[str, int],
    queue: str = "default",
    image: str = DEFAULT_IMAGE,
) -> tuple[str, list[str], list[str]]:
    """(the JobSet YAML, the keys and annotations it uses, notes)."""
    runs = _runs(p.hosts, by_leaf=True)
    by_leaf = True
    if len(runs) > KUEUE_MAX_PODSETS:
        runs, by_leaf = _runs(p.hosts, by_leaf=False), False
    if len(runs) > KUEUE_MAX_PODSETS:
        raise DomainError(
            "export",
            f"the placement needs {len(runs)} pod sets (runs of hosts of one pool and rank count); Kueue admits at "
            f"most {KUEUE_MAX_PODSETS} per workload",
        )
    split_hosts = _split_tp_hosts(p)
    notes: list[str] = []
    jobs = []
    coordinator = f"{name}-{_job_name(0)}-0-0.{name}"
    for k, run in enumerate(runs):
        g = gpus_per_host[run.hosts[0].pool]
        nproc = run.hosts[0].ranks
        annotations = _run_annotations(k, run, p.tp, nproc, split_hosts, notes)
        script = [
            *_heredocs(launch.files),
            f"exec torchrun --nnodes={len(p.hosts)} --nproc-per-node={nproc} "
            f"--node-rank=$((NODE_RANK_OFFSET + JOB_COMPLETION_INDEX)) --master-addr={coordinator} "
            f"--master-port={MASTER_PORT} {launch.entry} \\\n  {launch.args}",
        ]
        jobs.append(_replicated_job(k, run, annotations, _pod_spec(run, script, image, g, launch.env)))
        if nproc < g:
            notes.append(f"{_job_name(k)}: {g - nproc} of each host's {g} GPUs run no rank")
    doc = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {
            "name": name,
            "labels": {KUEUE_QUEUE: queue},
            "annotations": {"meshplan/host-order": ",".join(h.name for h in p.hosts)},
        },
        "spec": {
            "network": {"enableDNSHostnames": True},
            "coordinator": {"replicatedJob": _job_name(0), "jobIndex": 0, "podIndex": 0},
            "replicatedJobs": jobs,
        },
    }
    if not by_leaf:
        notes.append(
            f"more than {KUEUE_MAX_PODSETS} leaf-switch runs: one pod set per pool run, leaf topology preferred"
        )
    notes.append(
        f"the Kueue Topology must list its levels top down with the leaf above the NVLink domain: {LEAF_LABEL}, "
        f"then {NVLINK_LABEL}, then {HOSTNAME_LABEL} (Kueue refuses a slice level above the pod set's level); "
        "within a replicated job Kueue chooses which listed host runs which completion index, keeping each slice "
        "in one NVLink domain"
    )
    notes.append(
        f"needs Kueue {KUEUE_MIN_VERSION} or later (the podset-slice annotations) and JobSet {JOBSET_MIN_VERSION} "
        "or later (spec.coordinator)"
    )
    if image == DEFAULT_IMAGE:
        notes.append(f"image {DEFAULT_IMAGE}: use one with the framework installed")
    text = yaml.dump(doc, Dumper=_Dumper, sort_keys=False, width=120)
    return text, sorted(_keys(doc) | set(annotations_of(doc))), notes


def _run_annotations(k: int, run: _Run, tp: int, nproc: int, split_hosts: set[str], notes: list[str]) -> dict[str, str]:
    """A run's Kueue topology annotations: its leaf (required where the run is under one leaf), and a slice of
    the pods of one TP group per NVLink domain where TP spans pods and no placed TP group is split (else a note)."""
    annotations = {KUEUE_REQUIRED if run.one_leaf else KUEUE_PREFERRED: LEAF_LABEL}
    tp_pods = tp // nproc if tp > nproc and tp % nproc == 0 else 1
    if tp_pods > 1:
        if len(run.hosts) % tp_pods or any(h.name in split_hosts for h in run.hosts):
            notes.append(
                f"{_job_name(k)}: no slice constraint: its TP groups are split across NVLink domains on the "
                "placed hosts (see degraded)"
            )
        else:
            annotations[KUEUE_SLICE_REQUIRED] = NVLINK_LABEL
            annotations[KUEUE_SLICE_SIZE] = str(tp_pods)
    return annotations


def _pod_spec(
    run: _Run, script: list[str], image: str, g: int, env: tuple[tuple[str, str], ...] = ()
) -> dict[str, Any]:
    """A run's pod: on its placed hosts (required node affinity), one trainer container with all `g` GPUs running
    `script`, the run's first node rank in NODE_RANK_OFFSET and the framework export's `env`, /dev/shm in
    memory."""
    return {
        "restartPolicy": "Never",
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": HOSTNAME_LABEL, "operator": "In", "values": [h.name for h in run.hosts]}
                            ]
                        }
                    ]
                }
            }
        },
        "containers": [
            {
                "name": "trainer",
                "image": image,
                "command": ["bash", "-c", _Literal("\n".join(script) + "\n")],
                "env": [
                    {"name": "NODE_RANK_OFFSET", "value": str(run.first_node_rank)},
                    {"name": "NCCL_DEBUG", "value": "WARN"},
                    *({"name": k, "value": v} for k, v in env),
                ],
                "resources": {"limits": {"nvidia.com/gpu": g}},
                "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
            }
        ],
        "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}}],
    }


def _replicated_job(k: int, run: _Run, annotations: dict[str, str], pod_spec: dict[str, Any]) -> dict[str, Any]:
    """A run as one JobSet replicated job: an indexed Job of one pod per host, no retries."""
    return {
        "name": _job_name(k),
        "replicas": 1,
        "template": {
            "spec": {
                "parallelism": len(run.hosts),
                "completions": len(run.hosts),
                "completionMode": "Indexed",
                "backoffLimit": 0,
                "template": {"metadata": {"annotations": annotations}, "spec": pod_spec},
            }
        },
    }


def _job_name(k: int) -> str:
    return f"nodes-{k}"


def _split_tp_hosts(p: Placement) -> set[str]:
    """Hosts holding a rank of a TP group split across NVLink domains."""
    split = {g for g, d in enumerate(p.tp_domains) if " + " in d}
    return {h.name for h in p.hosts if any(r // p.tp in split for r in range(h.first_rank, h.first_rank + h.ranks))}


def _keys(d: object, prefix: str = "") -> set[str]:
    """Dotted keys of a manifest (list items under their list's key); annotation and label names not included."""
    out: set[str] = set()
    if isinstance(d, dict):
        for k, v in d.items():
            if prefix.endswith(("annotations", "labels", "limits")):
                continue
            name = f"{prefix}.{k}" if prefix else str(k)
            out.add(name)
            out |= _keys(v, name)
    elif isinstance(d, list):
        for v in d:
            out |= _keys(v, prefix)
    return out


def annotations_of(doc: dict[str, Any]) -> list[str]:
    """Every annotation and label name of the manifest (and resource names under limits)."""
    out: list[str] = []

    def walk(d: object, key: str = "") -> None:
        if isinstance(d, dict):
            for k, v in d.items():
                if key in ("annotations", "labels", "limits"):
                    out.append(str(k))
                walk(v, str(k))
        elif isinstance(d, list):
            for v in d:
                walk(v, key)

    walk(doc)
    return out


def export_job(
    scheduler: str,
    model: ModelSpec,
    w: TrainingWorkload,
    c: ParallelConfig,
    placement: Placement,
    cluster: ClusterSpec,
    *,
    framework: str | None = None,
    model_ref: str = "MODEL",
    estimate: Estimate | None = None,
    job_name: str = "meshplan",
    queue: str = "default",
    image: str = DEFAULT_IMAGE,
) -> Export:
    """The plan's job for `scheduler` (slurm or k8s) on `placement`, launching `framework` (the plan's; the
    workload's when it names one; else Megatron-LM) on `cluster`'s hosts."""
    gpus_per_host = {p.name: p.gpus_per_node for p in cluster.pools}
    fw = framework or named_framework(w.framework) or AUTO_PRICED_AS
    if fw not in FRAMEWORKS:
        raise UnknownNameError("framework", fw, FRAMEWORKS)
    launch, inner = framework_launch(fw, model, w, c, model_ref, estimate)
    if scheduler == "slurm":
        text, options, notes = slurm_script(job_name, placement, launch, gpus_per_host)
        out = Export(tool="slurm", format="bash", content=text, options=options)
    elif scheduler == "k8s":
        text, options, notes = jobset_manifest(job_name, placement, launch, gpus_per_host, queue, image)
        out = Export(tool="k8s", format="yaml", content=text, options=options)
    else:
        raise UnknownNameError("export", scheduler, SCHEDULERS)
    out.notes = [f"launches {fw} as its own export writes it", *notes, *inner.notes]
    out.notes += [f"placement: {d}" for d in placement.degraded]
    return out
