"""`meshplan import-slurm | import-k8s | sync`: cluster inventories from a scheduler's own view (issue 34 §1)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from api.cli_options import DomainLabelsOpt, FabricLabelsOpt, NicGbpsOpt, NicsPerNodeOpt, OutputOpt, TopologyOpt
from api.cli_output import err, fail, write_output
from optimizer.errors import DomainError

# Start-up (issue 49): the inventory readers (pydantic specs, YAML) load inside the commands that use them.
if TYPE_CHECKING:
    from optimizer.spec.scheduler_inventory.inventory_document import ClusterImport, ImportDefaults
    from optimizer.spec.scheduler_inventory.kubernetes import KubernetesLabels
    from optimizer.spec.scheduler_inventory.sources import KubernetesSource, SlurmSource

NodesArg = Annotated[Path, typer.Argument(help="The scheduler's JSON ('-' for stdin).")]
NameOpt = Annotated[str, typer.Option(help="Cluster name.")]
out = Console(width=None if sys.stdout.isatty() else 150)


def register(app: typer.Typer) -> None:
    app.command("import-slurm")(import_slurm)
    app.command("import-k8s")(import_k8s)
    app.command("sync")(sync)


def _read(path: Path, field: str) -> str:
    from optimizer.spec.yaml_documents import read_document, read_stream

    return read_stream(sys.stdin.buffer, field) if str(path) == "-" else read_document(path, field)


def _defaults(nic_gbps: float, nics_per_node: int | None) -> ImportDefaults:
    from optimizer.spec.scheduler_inventory.inventory_document import ImportDefaults

    if not 0 < nic_gbps <= 100_000:
        raise DomainError("--nic-gbps", f"must be above 0 and at most 100000 Gb/s (got {nic_gbps:g})")
    if nics_per_node is not None and not 0 <= nics_per_node <= 64:
        raise DomainError("--nics-per-node", f"must be between 0 and 64 (got {nics_per_node})")
    return ImportDefaults(nic_gbps=nic_gbps, nics_per_node=nics_per_node)


def _labels(fabric: str | None, domain: str | None) -> KubernetesLabels:
    from optimizer.spec.scheduler_inventory.kubernetes import KubernetesLabels

    def keys(text: str) -> list[str]:
        return [k.strip() for k in text.split(",") if k.strip()]

    fields: dict[str, list[str]] = {}
    if fabric is not None:
        fields["fabric"] = keys(fabric)
    if domain is not None:
        fields["domain"] = keys(domain)
    if any(len(v) > 8 for v in fields.values()):
        raise DomainError("--fabric-labels", "at most 8 label keys")
    return KubernetesLabels.model_validate(fields)


def _print_yaml(imported: ClusterImport, output: Path | None = None) -> None:
    """The inventory YAML, its notes as comments on top (the file says where it came from), on stdout or into
    `output` once whole."""
    import yaml

    head = "".join(f"# {line}\n" for note in imported.notes for line in note.splitlines())
    text = head + yaml.safe_dump(imported.document, sort_keys=False, default_flow_style=None, width=120)
    write_output(text, output)


def import_slurm(
    nodes: NodesArg,
    topology: TopologyOpt = None,
    name: NameOpt = "slurm",
    nic_gbps: NicGbpsOpt = 400.0,
    nics_per_node: NicsPerNodeOpt = None,
    output: OutputOpt = None,
    gpu: Annotated[
        list[str] | None,
        typer.Option(
            "--gpu",
            help="What a GRES type that names no variant means, NAME=GPU (repeatable): a100=A100-SXM-40GB. "
            "Without it a node's features or GRES naming a memory size (40gb) pick the variant, else the catalog's "
            "default is assumed and said.",
        ),
    ] = None,
) -> None:
    """Turn `sinfo --json` (or `scontrol show nodes --json`) and topology.conf into a cluster YAML: a pool per GPU
    type (GRES or features), node states from Slurm's states and flags, switches and blocks from the topology."""
    from optimizer.spec.gpu_catalog import canonical_gpu_name
    from optimizer.spec.scheduler_inventory.gpu_variant import parse_gpu_mappings
    from optimizer.spec.scheduler_inventory.inventory_document import cluster_document
    from optimizer.spec.scheduler_inventory.slurm import slurm_inventory
    from optimizer.spec.scheduler_inventory.topology_conf import parse_topology
    from optimizer.spec.yaml_documents import read_document

    try:
        defaults = _defaults(nic_gbps, nics_per_node)
        mapping = parse_gpu_mappings(gpu or [], "--gpu")
        topo = parse_topology(read_document(topology, "--topology"), str(topology)) if topology else None
        inventory = slurm_inventory(_read(nodes, "nodes"), topo, None, str(nodes), mapping)
        imported = cluster_document(inventory, name, None, defaults)
    except DomainError as exc:
        fail(exc)
    _print_yaml(imported, output)  # written first: a bad --output is the one line a refusal prints
    for type_name, gpu_name in inventory.assumed.items():  # the YAML's comments say it too
        err.print(
            f"warning: GPU type {type_name!r} names no variant: assumed {gpu_name}; map it with --gpu "
            f"{canonical_gpu_name(type_name)}=<GPU> if not",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )


def import_k8s(
    nodes: NodesArg,
    name: NameOpt = "k8s",
    fabric_labels: FabricLabelsOpt = None,
    domain_labels: DomainLabelsOpt = None,
    nic_gbps: NicGbpsOpt = 400.0,
    nics_per_node: NicsPerNodeOpt = None,
    output: OutputOpt = None,
) -> None:
    """Turn `kubectl get nodes -o json` into a cluster YAML: GPU type, count and memory from GPU Feature Discovery's
    labels, NVLink domains from nvidia.com/gpu.clique, switches from Topograph or Kueue topology labels, health
    from cordons and the Ready condition."""
    from optimizer.spec.scheduler_inventory.inventory_document import cluster_document
    from optimizer.spec.scheduler_inventory.kubernetes import kubernetes_inventory

    try:
        defaults, labels = _defaults(nic_gbps, nics_per_node), _labels(fabric_labels, domain_labels)
        inventory = kubernetes_inventory(_read(nodes, "nodes"), labels, None, str(nodes))
        imported = cluster_document(inventory, name, None, defaults)
    except DomainError as exc:
        fail(exc)
    _print_yaml(imported, output)


def sync(
    cluster_id: Annotated[int, typer.Argument(help="The cluster to sync.", min=1, max=2_147_483_647)],
    source: Annotated[
        str | None, typer.Option("--from", help="slurm or k8s (stored on the cluster); default: the stored source.")
    ] = None,
    slurm_conf: Annotated[Path | None, typer.Option(help="Slurm: SLURM_CONF for sinfo and scontrol.")] = None,
    topology: TopologyOpt = None,
    context: Annotated[str | None, typer.Option(help="Kubernetes: kubeconfig context.")] = None,
    kubeconfig: Annotated[Path | None, typer.Option(help="Kubernetes: kubeconfig file.")] = None,
    selector: Annotated[str | None, typer.Option(help="Kubernetes: label selector of the nodes (kubectl -l).")] = None,
    fabric_labels: FabricLabelsOpt = None,
    domain_labels: DomainLabelsOpt = None,
    nic_gbps: NicGbpsOpt = 400.0,
    nics_per_node: NicsPerNodeOpt = None,
    replan: Annotated[
        bool | None,
        typer.Option("--replan/--no-replan", help="Check the watches on a new revision (default: the setting)."),
    ] = None,
) -> None:
    """Read the cluster's scheduler now (sinfo --json / kubectl on this host) and store a new inventory revision
    when something changed; a scheduler that does not answer leaves the last revision (exit code 1)."""
    from pydantic import ValidationError

    from api.service_cli import _settings, database_errors
    from optimizer.spec.scheduler_inventory.sources import KubernetesSource, SlurmSource
    from optimizer.spec.validation_errors import domain_error_from_validation
    from service.scheduler_sync import sync_cluster
    from store.db import database
    from workers.dispatch import InProcessDispatcher, make_dispatcher, send_committed

    cfg = _settings()
    try:
        defaults = _defaults(nic_gbps, nics_per_node)
        chosen: SlurmSource | KubernetesSource | None = None
        if source == "slurm":
            chosen = SlurmSource(
                slurm_conf=str(slurm_conf.absolute()) if slurm_conf else None,
                topology_file=str(topology.absolute()) if topology else None,
                defaults=defaults,
            )
        elif source == "k8s":
            chosen = KubernetesSource(
                context=context,
                kubeconfig=str(kubeconfig.absolute()) if kubeconfig else None,
                selector=selector,
                labels=_labels(fabric_labels, domain_labels),
                defaults=defaults,
            )
        elif source is not None:
            raise DomainError("--from", f"must be slurm or k8s (got {source!r})")
        with database_errors(cfg.database_url):
            db = database(cfg.database_url)
            with db.session() as s:
                outcome = sync_cluster(s, cluster_id, chosen, cfg, replan)
    except DomainError as exc:
        fail(exc)
    except ValidationError as exc:  # a rule on a path, context or selector
        fail(domain_error_from_validation(exc, "source"))
    dispatcher = make_dispatcher(db, cfg)
    send_committed(dispatcher, outcome.replan_jobs)
    out.print(f"cluster {cluster_id}: {outcome.summary}", markup=False, highlight=False)
    if outcome.diff is not None:
        for key in ("added", "removed", "drained", "failed", "restored", "other"):
            names = getattr(outcome.diff, key)
            if names:
                out.print(f"  {key}: {', '.join(names)}", markup=False, highlight=False)
    for note in outcome.notes:
        err.print(f"note: {note}", markup=False, highlight=False)
    if outcome.replan_jobs:
        out.print(f"watch re-plan jobs: {outcome.replan_jobs}")
        if isinstance(dispatcher, InProcessDispatcher):
            dispatcher.wait()
    if outcome.status == "unreachable":
        raise typer.Exit(code=1)
