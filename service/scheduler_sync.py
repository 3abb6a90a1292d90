"""Sync a cluster's inventory from its scheduler: run `sinfo --json` / `scontrol show topology` or `kubectl get nodes
-o json` on this host, build the inventory (optimizer.spec.scheduler_inventory), and store a new revision only when
something changed, with its diff; the cluster's watches are then checked as after a node-state change."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, TypeAdapter, ValidationError
from sqlalchemy.orm import Session

from optimizer.errors import DomainError
from optimizer.spec.cluster_spec import ClusterSpec
from optimizer.spec.gpu_catalog import GPUSpec
from optimizer.spec.inventory import InventoryDiff, diff_inventories
from optimizer.spec.scheduler_inventory.inventory_document import ImportDefaults, cluster_document
from optimizer.spec.scheduler_inventory.kubernetes import KubernetesLabels, kubernetes_inventory
from optimizer.spec.scheduler_inventory.records import SchedulerInventory, SchedulerReportedError
from optimizer.spec.scheduler_inventory.slurm import slurm_inventory
from optimizer.spec.scheduler_inventory.sources import KubernetesSource, SlurmSource, SyncSource
from optimizer.spec.scheduler_inventory.topology_conf import parse_topology
from optimizer.spec.validation_errors import domain_error_from_validation
from service.catalog import cluster_from_document, create_cluster
from service.replan import check_watches
from store.models import Cluster
from store.repositories.clusters import ClusterRepository, revision_spec
from store.repositories.gpu_types import GpuTypeRepository
from store.settings import Settings, settings

# sinfo answers in tens of milliseconds; a controller that does not answer within this is down for the sync.
COMMAND_TIMEOUT_S = 30.0

Runner = Callable[[list[str], dict[str, str]], str]
SOURCE = TypeAdapter(SyncSource)


class SchedulerUnreachable(Exception):
    """The scheduler's command could not be run or did not answer: the last revision stays as it was."""


class SyncOutcome(BaseModel):
    """What one sync did."""

    cluster_id: int = Field(description="The cluster synced.")
    source: str = Field(description="slurm or k8s.")
    status: Literal["created", "unchanged", "unreachable"] = Field(
        description="created: a new revision; unchanged: the scheduler says what the last revision says; "
        "unreachable: the scheduler did not answer and the last revision stays."
    )
    revision: int | None = Field(description="The cluster's current revision number after the sync.")
    diff: InventoryDiff | None = Field(default=None, description="Against the revision before (a new revision).")
    summary: str = Field(description="One line: what changed, or why nothing was stored.")
    notes: list[str] = Field(default_factory=list, description="What the import assumed or left out.")
    replan_jobs: list[int] = Field(default_factory=list, description="Watch re-plan jobs submitted.")


def run_command(argv: list[str], env: dict[str, str]) -> str:
    """The standard output of `argv` (no shell); SchedulerUnreachable when it cannot run, fails or hangs."""
    shown = " ".join(argv)
    try:
        proc = subprocess.run(
            argv, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, env={**os.environ, **env}, check=False
        )
    except FileNotFoundError:
        raise SchedulerUnreachable(f"{argv[0]} is not installed on this host") from None
    except subprocess.TimeoutExpired:
        raise SchedulerUnreachable(f"`{shown}` did not answer within {COMMAND_TIMEOUT_S:g} s") from None
    except OSError as exc:
        raise SchedulerUnreachable(f"`{shown}` could not run: {exc.strerror}") from None
    if proc.returncode != 0:
        lines = [ln for ln in (proc.stderr or proc.stdout).splitlines() if ln.strip()]
        raise SchedulerUnreachable(f"`{shown}` exited {proc.returncode}: {(lines[-1] if lines else '')[:200]}")
    return proc.stdout


SOURCE_FILES = ("slurm_conf", "topology_file", "kubeconfig")
"""The fields of a sync source that name a file on the host that syncs."""


def check_source_files(source: SlurmSource | KubernetesSource, cfg: Settings) -> None:
    """Every file a sync source names lies inside a directory the operator allowed (MESHPLAN_SYNC_FILE_DIRS;
    none by default): a write token must not make the server read any file it names [issue 59 item 4]. Checked
    before the file is looked at, so the answer says nothing of files outside them."""
    allowed = cfg.readable_dirs()
    for field in SOURCE_FILES:
        path = getattr(source, field, None)
        if path is None:
            continue
        real = os.path.realpath(path)
        if not any(real == d or real.startswith(d.rstrip("/") + "/") for d in allowed):
            where = ", ".join(allowed) if allowed else "none is set"
            raise DomainError(
                f"source.{field}",
                f"must be a file inside a directory the operator lets the server read (MESHPLAN_SYNC_FILE_DIRS: "
                f"{where})",
            )


def read_slurm(source: SlurmSource, custom: dict[str, GPUSpec], run: Runner = run_command) -> SchedulerInventory:
    """A Slurm cluster's GPU nodes from `sinfo --json` and its topology (topology.conf or `scontrol show
    topology`)."""
    env = {"SLURM_CONF": source.slurm_conf} if source.slurm_conf else {}
    if source.slurm_conf and not Path(source.slurm_conf).is_file():  # sinfo would hang a minute looking for one
        raise DomainError("source.slurm_conf", f"no such file on this host: {source.slurm_conf}")
    nodes = run(["sinfo", "--json"], env)
    if source.topology_file:
        try:
            text, what = Path(source.topology_file).read_text(encoding="utf-8"), source.topology_file
        except (OSError, UnicodeDecodeError) as exc:
            raise DomainError("source.topology_file", f"cannot read {source.topology_file}: {exc}") from None
    else:
        try:
            text, what = run(["scontrol", "show", "topology"], env), "scontrol show topology"
        except SchedulerUnreachable:
            text, what = "", "scontrol show topology"  # topology/none: no switches, which the notes say
    try:
        topology = parse_topology(text, what)
    except DomainError as exc:
        if not source.topology_file:
            raise
        # A file on the server: the error names its line, never its content [issue 59 item 4].
        line = re.match(r"line \d+", exc.rule)
        raise DomainError(
            "source.topology_file",
            f"is not a Slurm topology.conf ({line[0] if line else 'no switch or block found'})",
        ) from None
    try:
        return slurm_inventory(nodes, topology, custom, "sinfo --json")
    except SchedulerReportedError as exc:
        raise SchedulerUnreachable(exc.rule) from None


def read_kubernetes(
    source: KubernetesSource, custom: dict[str, GPUSpec], run: Runner = run_command
) -> SchedulerInventory:
    """A Kubernetes cluster's GPU nodes from `kubectl get nodes -o json`."""
    argv = ["kubectl", "get", "nodes", "-o", "json"]
    if source.context:
        argv += ["--context", source.context]
    if source.kubeconfig:
        argv += ["--kubeconfig", source.kubeconfig]
    if source.selector:
        argv += ["-l", source.selector]
    return kubernetes_inventory(run(argv, {}), source.labels, custom, "kubectl get nodes -o json")


def read_scheduler(
    source: SlurmSource | KubernetesSource,
    custom: dict[str, GPUSpec],
    run: Runner = run_command,
    cfg: Settings | None = None,
) -> SchedulerInventory:
    """The scheduler's inventory, whichever scheduler it is (its files confined to the allowed directories)."""
    check_source_files(source, cfg or settings())
    if isinstance(source, SlurmSource):
        return read_slurm(source, custom, run)
    return read_kubernetes(source, custom, run)


def parse_source(document: object) -> SlurmSource | KubernetesSource:
    """A stored or posted sync source, validated."""
    try:
        return SOURCE.validate_python(document)
    except ValidationError as exc:
        raise domain_error_from_validation(exc, "source") from None


def note_sync_error(s: Session, cluster_id: int, error: DomainError) -> None:
    """Record on the cluster that its scheduler's answer could not be read (nothing else is stored)."""
    repo = ClusterRepository(s)
    repo.note_sync(repo.get(cluster_id), f"error: {error}")


def create_synced_cluster(
    s: Session,
    name: str,
    source: SlurmSource | KubernetesSource,
    run: Runner = run_command,
    cfg: Settings | None = None,
) -> SyncOutcome:
    """A new cluster whose first revision is what its scheduler says now (a scheduler that does not answer is an
    error naming the source: there is no revision to keep)."""
    try:
        inventory = read_scheduler(source, GpuTypeRepository(s).specs(), run, cfg)
    except SchedulerUnreachable as exc:
        raise DomainError("source", f"{source.kind} unreachable: {exc}; nothing was stored") from None
    cluster = ClusterRepository(s).create(name)
    return _record(s, cluster, source, True, inventory, "", cfg or settings(), False)


def sync_cluster(
    s: Session,
    cluster_id: int,
    source: SlurmSource | KubernetesSource | None = None,
    cfg: Settings | None = None,
    replan: bool | None = None,
    run: Runner = run_command,
) -> SyncOutcome:
    """Read the cluster's scheduler (`source`, stored on the cluster once it answers; default the stored one) and
    record what it says as a new revision when it differs from the current one. An unreachable scheduler leaves
    the current revision and says so. With a new revision the cluster's watches are checked (`replan`, default
    the replan_on_inventory_change setting); the caller sends the jobs after its commit."""
    cluster = ClusterRepository(s).get(cluster_id)
    given = source is not None
    if source is None:
        if cluster.sync_source is None:
            raise DomainError("source", f"cluster {cluster_id} has no sync source; name one (slurm or k8s)")
        source = parse_source(cluster.sync_source)
    custom = _gpu_types(s, cluster)
    try:  # the scheduler is asked before anything is written: no write lock is held while it answers
        inventory = read_scheduler(source, custom, run, cfg)
        return _record(s, cluster, source, given, inventory, "", cfg or settings(), replan)
    except SchedulerUnreachable as exc:
        return _record(s, cluster, source, given, None, str(exc), cfg or settings(), replan)


def _what_changed(diff: InventoryDiff) -> str:
    """The diff in one line, nodes moved in the fabric and pool settings included."""
    parts = [] if diff.summary() == "no change" else [diff.summary()]
    if diff.other:
        parts.append(", ".join(diff.other[:3]) + (f" (+{len(diff.other) - 3})" if len(diff.other) > 3 else ""))
    return ", ".join(parts) or "no change"


def _record(
    s: Session,
    cluster: Cluster,
    source: SlurmSource | KubernetesSource,
    store_source: bool,
    inventory: SchedulerInventory | None,
    failure: str,
    cfg: Settings,
    replan: bool | None,
) -> SyncOutcome:
    """Store what the scheduler said (or that it did not answer) on the cluster."""
    repo = ClusterRepository(s)
    if store_source and inventory is not None:  # a source that did not answer never replaces one that did
        repo.set_sync_source(cluster, source.model_dump(mode="json"))
    head = repo.head(cluster)
    base: ClusterSpec | None = revision_spec(cluster, head) if head is not None else None
    if inventory is None:
        kept = f"revision {head.number} kept" if head is not None else "no revision stored"
        summary = f"{source.kind} unreachable: {failure}; {kept}"
        repo.note_sync(cluster, summary)
        return SyncOutcome(
            cluster_id=cluster.id,
            source=source.kind,
            status="unreachable",
            revision=head.number if head is not None else None,
            summary=summary,
        )
    imported = cluster_document(inventory, cluster.name, base, source.defaults, GpuTypeRepository(s).specs())
    spec = cluster_from_document(s, cluster.name, imported.document)
    diff = diff_inventories(base, spec) if base is not None else None
    what = _what_changed(diff) if diff is not None else f"{sum(p.node_count for p in spec.pools)} nodes"
    rev, created = repo.record(cluster.id, spec, f"sync from {source.kind}: {what}")
    summary = f"revision {rev.number}: {what}" if created else f"unchanged (revision {rev.number})"
    repo.note_sync(cluster, summary)
    jobs: list[int] = []
    if created and base is not None and (cfg.replan_on_inventory_change if replan is None else replan):
        jobs = [c.job_id for c in check_watches(s, "inventory_change", cluster.id, cfg) if c.job_id is not None]
    return SyncOutcome(
        cluster_id=cluster.id,
        source=source.kind,
        status="created" if created else "unchanged",
        revision=rev.number,
        diff=diff if created else None,
        summary=summary,
        notes=imported.notes,
        replan_jobs=jobs,
    )


def _gpu_types(s: Session, cluster: Cluster) -> dict[str, GPUSpec]:
    """The user-defined GPU types a scheduler's names may resolve to: the stored ones and the cluster's own."""
    head = ClusterRepository(s).head(cluster)
    own = {g.name: g for g in revision_spec(cluster, head).gpu_types} if head is not None else {}
    return {**GpuTypeRepository(s).specs(), **own}


def import_cluster(
    s: Session, name: str, inventory: SchedulerInventory, defaults: ImportDefaults, cause: str
) -> tuple[Cluster, list[str]]:
    """A new cluster from a scheduler's output posted by a client (no sync source): the cluster and the notes."""
    imported = cluster_document(inventory, name, None, defaults, GpuTypeRepository(s).specs())
    cluster, _rev = create_cluster(s, name, cluster_from_document(s, name, imported.document), cause)
    return cluster, imported.notes


def import_slurm(
    s: Session, name: str, nodes_json: str, topology: str | None, defaults: ImportDefaults
) -> tuple[Cluster, list[str]]:
    """A new cluster from `sinfo --json` output and a topology.conf."""
    custom = GpuTypeRepository(s).specs()
    inventory = slurm_inventory(nodes_json, parse_topology(topology or "", "topology"), custom, "sinfo --json")
    return import_cluster(s, name, inventory, defaults, "imported from Slurm")


def import_kubernetes(
    s: Session, name: str, nodes_json: str, labels: KubernetesLabels, defaults: ImportDefaults
) -> tuple[Cluster, list[str]]:
    """A new cluster from `kubectl get nodes -o json` output."""
    inventory = kubernetes_inventory(nodes_json, labels, GpuTypeRepository(s).specs(), "kubectl get nodes -o json")
    return import_cluster(s, name, inventory, defaults, "imported from Kubernetes")


def set_sync_source(
    s: Session, cluster_id: int, source: SlurmSource | KubernetesSource | None, cfg: Settings | None = None
) -> Cluster:
    """Store (or clear) the scheduler a cluster is synced from, without syncing (its files checked as a sync
    would read them)."""
    repo = ClusterRepository(s)
    cluster = repo.get(cluster_id)
    if source is not None:
        check_source_files(source, cfg or settings())
    repo.set_sync_source(cluster, source.model_dump(mode="json") if source is not None else None)
    return cluster
