"""Syncing from Kubernetes through the service: the command it runs, a revision only when something changed, the
diff, the stored source, and a scheduler that cannot be reached."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from optimizer.errors import DomainError
from optimizer.spec.gpu_catalog import GPUSpec
from optimizer.spec.scheduler_inventory.inventory_document import ImportDefaults
from optimizer.spec.scheduler_inventory.kubernetes import KubernetesLabels
from optimizer.spec.scheduler_inventory.sources import KubernetesSource, SlurmSource
from service.scheduler_sync import create_synced_cluster, import_slurm, parse_source, sync_cluster
from store.db import Database
from store.repositories.clusters import ClusterRepository, revision_spec
from store.repositories.gpu_types import GpuTypeRepository
from store.settings import Settings, settings
from tests.factories import unique

FIXTURE = json.loads(
    (Path(__file__).parents[1] / "optimizer" / "spec" / "scheduler_data" / "kubectl-nodes.json").read_text()
)


class Kubectl:
    """kubectl as the sync runs it: records the command and prints the nodes it holds."""

    def __init__(self) -> None:
        self.doc = copy.deepcopy(FIXTURE)
        self.calls: list[list[str]] = []

    def node(self, name: str) -> dict[str, Any]:
        return next(i for i in self.doc["items"] if i["metadata"]["name"] == name)

    def __call__(self, argv: list[str], env: dict[str, str]) -> str:
        self.calls.append(argv)
        return json.dumps(self.doc)


def test_k8s_sync_stores_a_revision_only_on_a_change_with_its_diff(db: Database) -> None:
    kubectl = Kubectl()
    source = KubernetesSource(context="prod", selector="nvidia.com/gpu.present=true")
    cfg = Settings(database_url="sqlite://", replan_on_inventory_change=True)
    with db.session() as s:
        first = create_synced_cluster(s, unique("k8s"), source, run=kubectl)
    assert kubectl.calls == [["kubectl", "get", "nodes", "-o", "json", "--context", "prod", "-l", source.selector]]
    assert first.status == "created" and first.revision == 1 and first.diff is None
    with db.session() as s:
        same = sync_cluster(s, first.cluster_id, cfg=cfg, run=kubectl)  # the stored source
    assert same.status == "unchanged" and same.revision == 1
    kubectl.node("dgx-h100-01")["spec"]["unschedulable"] = True  # kubectl cordon
    ready = kubectl.node("gb200-r1-t02")["status"]["conditions"][-1]
    ready["status"], ready["reason"] = "False", "KubeletNotReady"
    kubectl.node("dgx-h100-03")["spec"].pop("unschedulable")  # kubectl uncordon
    with db.session() as s:
        second = sync_cluster(s, first.cluster_id, cfg=cfg, run=kubectl)
        cluster = ClusterRepository(s).get(first.cluster_id)
        assert cluster.last_sync == second.summary and cluster.sync_source == source.model_dump(mode="json")
    assert second.status == "created" and second.revision == 2 and second.diff is not None
    assert (second.diff.drained, second.diff.failed, second.diff.restored) == (
        ["dgx-h100-01"],
        ["gb200-r1-t02"],
        ["dgx-h100-03"],
    )
    assert second.summary == "revision 2: 1 drained, 1 failed, 1 restored, gb200-186gb -4 GPUs"


def test_an_unreachable_scheduler_leaves_the_revision_and_says_so(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    kubectl = Kubectl()
    with db.session() as s:
        first = create_synced_cluster(s, unique("k8s"), KubernetesSource(), run=kubectl)
    monkeypatch.setenv("PATH", "/nonexistent")  # the real runner, on a host without kubectl
    other = KubernetesSource(context="elsewhere")
    with db.session() as s:
        out = sync_cluster(s, first.cluster_id, other)
        cluster = ClusterRepository(s).get(first.cluster_id)
        assert cluster.head_revision == 1 and cluster.sync_source == KubernetesSource().model_dump(mode="json")
    assert out.status == "unreachable" and out.revision == 1
    assert out.summary == "k8s unreachable: kubectl is not installed on this host; revision 1 kept"
    with db.session() as s, pytest.raises(DomainError, match="k8s unreachable: kubectl is not installed"):
        create_synced_cluster(s, unique("k8s"), other)


def test_bad_scheduler_output_stores_nothing(db: Database) -> None:
    kubectl = Kubectl()
    with db.session() as s:
        first = create_synced_cluster(s, unique("k8s"), KubernetesSource(), run=kubectl)
    kubectl.doc["items"].append(copy.deepcopy(kubectl.node("dgx-h100-02")))
    with db.session() as s, pytest.raises(DomainError, match="duplicate node name dgx-h100-02"):
        sync_cluster(s, first.cluster_id, run=kubectl)
    with db.session() as s:
        assert ClusterRepository(s).get(first.cluster_id).head_revision == 1


def test_sources_are_checked_before_they_run_anything() -> None:
    assert parse_source({"kind": "slurm"}) == SlurmSource()
    assert parse_source({"kind": "k8s", "labels": {"fabric": ["a/b"]}}).labels == KubernetesLabels(fabric=["a/b"])  # type: ignore[union-attr]
    for bad, field in (
        ({"kind": "pbs"}, "source"),
        ({"kind": "slurm", "slurm_conf": "relative.conf"}, "source.slurm.slurm_conf"),
        ({"kind": "slurm", "topology_file": "/etc/shadow"}, "source.slurm.topology_file"),  # not a .conf
        ({"kind": "k8s", "context": "a; rm -rf /"}, "source.k8s.context"),
    ):
        with pytest.raises(DomainError) as err:
            parse_source(bad)
        assert err.value.field.startswith(field), (bad, err.value.field)


def test_gres_types_resolve_to_the_stored_user_defined_gpus(db: Database) -> None:
    nvl = GPUSpec(name=unique("H100-NVL-94GB"), bf16_tflops=835, memory_gib=94, memory_tbps=3.9, source="test")
    gres = f"gpu:{nvl.name.lower().replace('-', '_')}:2"  # as NVML autodetection spells it
    sinfo = json.dumps({"nodes": [{"name": f"n{i}", "state": ["IDLE"], "gres": gres} for i in range(2)]})
    with db.session() as s:
        GpuTypeRepository(s).create(nvl)
        cluster, notes = import_slurm(s, unique("nvl"), sinfo, None, ImportDefaults())
        spec = revision_spec(cluster, ClusterRepository(s).head(cluster))  # type: ignore[arg-type]
    assert spec.pools[0].gpu == nvl.name and spec.pools[0].gpus_per_node == 2
    assert [g.name for g in spec.gpu_types] == [nvl.name] and any("2 nodes x 2" in n for n in notes)


def test_a_node_moved_to_another_switch_is_a_new_revision_that_says_so(db: Database) -> None:
    kubectl = Kubectl()
    with db.session() as s:
        first = create_synced_cluster(s, unique("k8s"), KubernetesSource(), run=kubectl)
    labels = kubectl.node("gb200-r2-t03")["metadata"]["labels"]
    labels["nvidia.com/gpu.clique"] = labels["nvidia.com/gpu.clique"].replace("c32.2", "c31.1")  # into rack 1
    with db.session() as s:
        moved = sync_cluster(s, first.cluster_id, run=kubectl)
    assert (
        moved.status == "created" and moved.diff is not None and "node gb200-r2-t03 nvlink_domain" in moved.diff.other
    )
    assert moved.summary == "revision 2: node gb200-r2-t03 nvlink_domain"
    assert any("NVLink domains hold 17, 19 nodes, not one size: domain_size 72 kept" in n for n in moved.notes)


def sinfo_with_two_nodes(argv: list[str], env: dict[str, str]) -> str:
    """sinfo --json as Slurm prints it, two GPU nodes (what the sync runs; no file is read by it)."""
    return json.dumps({"nodes": [{"name": f"n{i}", "state": ["IDLE"], "gres": "gpu:h100:8"} for i in range(2)]})


def test_a_sync_source_reads_no_file_outside_the_directories_the_operator_allows(
    db: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write token names the files a sync reads; the server reads only those inside MESHPLAN_SYNC_FILE_DIRS
    (none by default), before looking at the file, and an error on an allowed file names its line, never its
    content [issue 59 item 4]."""
    allowed, outside = tmp_path / "slurm", tmp_path / "etc"
    allowed.mkdir()
    outside.mkdir()
    (outside / "resolv.conf").write_text("nameserver 10.0.0.1\n")
    (allowed / "escape.conf").symlink_to(outside / "resolv.conf")
    (allowed / "topology.conf").write_text("nameserver 10.0.0.1\n")
    cases = [
        (str(outside / "resolv.conf"), ""),  # nothing allowed by default
        (str(outside / "resolv.conf"), str(allowed)),
        (f"{allowed}/../etc/resolv.conf", str(allowed)),  # `..` out of an allowed directory
        (str(allowed / "escape.conf"), str(allowed)),  # a link out of it
    ]
    for path, dirs in cases:
        monkeypatch.setenv("MESHPLAN_SYNC_FILE_DIRS", dirs)
        settings.cache_clear()
        with db.session() as s, pytest.raises(DomainError) as err:
            create_synced_cluster(s, unique("s"), SlurmSource(topology_file=path), run=sinfo_with_two_nodes)
        assert err.value.field == "source.topology_file", path
        assert "MESHPLAN_SYNC_FILE_DIRS" in err.value.rule and "nameserver" not in str(err.value)
    monkeypatch.setenv("MESHPLAN_SYNC_FILE_DIRS", str(allowed))
    settings.cache_clear()
    with db.session() as s, pytest.raises(DomainError) as err:
        create_synced_cluster(
            s, unique("s"), SlurmSource(topology_file=str(allowed / "topology.conf")), run=sinfo_with_two_nodes
        )
    assert err.value.field == "source.topology_file"
    assert err.value.rule == "is not a Slurm topology.conf (line 1)"  # the line, not what it says
    (allowed / "topology.conf").write_text("SwitchName=leaf0 Nodes=n[0-1]\n")
    with db.session() as s:
        made = create_synced_cluster(
            s, unique("s"), SlurmSource(topology_file=str(allowed / "topology.conf")), run=sinfo_with_two_nodes
        )
    assert made.status == "created"
