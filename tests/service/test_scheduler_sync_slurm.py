"""`sync` against a real Slurm controller: it sees exactly the drains, downs and resumes scontrol makes, stores a
revision only when something changed, and the cluster's watch re-plans."""

from __future__ import annotations

import time

import pytest

from optimizer.spec.model_loading import load_model_preset
from optimizer.spec.scheduler_inventory.sources import SlurmSource
from service.catalog import create_model
from service.jobs import run_job
from service.replan import check_watches
from service.scheduler_sync import create_synced_cluster, sync_cluster
from store.db import Database
from store.repositories.clusters import ClusterRepository, revision_spec
from store.repositories.watches import WatchRepository
from store.settings import Settings
from tests.factories import training_watch, unique
from tests.sent import Sent
from tests.slurm_cluster import SlurmCluster
from workers import service as workers_service
from workers.service import replan_all


def test_sync_sees_what_scontrol_changed_and_the_watch_replans(
    slurm: SlurmCluster, sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    t0 = time.monotonic()
    db = Database(sqlite_url)
    # The operator lets the server read the test cluster's files (MESHPLAN_SYNC_FILE_DIRS; none by default).
    cfg = Settings(database_url=sqlite_url, replan_on_inventory_change=True, sync_file_dirs=str(slurm.root))
    source = SlurmSource(slurm_conf=str(slurm.conf))
    with db.session() as s:
        first = create_synced_cluster(s, unique("slurm"), source, cfg=cfg)
        cluster = ClusterRepository(s).get(first.cluster_id)
        spec = revision_spec(cluster, ClusterRepository(s).head(cluster))  # type: ignore[arg-type]
        model, _ = create_model(s, unique("m"), load_model_preset("llama-3-8b"))
        watch = training_watch(s, cluster, model)
        job = check_watches(s, "nightly", cluster.id)[0].job_id
    pool = spec.pools[0]
    assert [p.name for p in spec.pools] == ["h100-sxm-80gb"] and pool.gpus_per_node == 8 and pool.node_count == 16
    assert pool.healthy_nodes == 16 and pool.pod_size == 8
    nodes = {n.name: n for n in pool.node_list}
    assert nodes["gpu01"].switches == ["leaf1", "spine"] and nodes["gpu16"].switches == ["leaf2", "spine"]
    assert any("2 node(s) without GPUs ignored" in n for n in first.notes), first.notes
    print(f"\n{first.summary}")
    assert job is not None and run_job(db, job) == "succeeded"  # the watch's plan on revision 1

    with db.session() as s:
        same = sync_cluster(s, cluster.id, cfg=cfg)
    assert same.status == "unchanged" and same.revision == 1 and same.replan_jobs == []

    slurm.scontrol("update", "nodename=gpu01,gpu12", "state=drain", "reason=meshplan-test")
    slurm.scontrol("update", "nodename=gpu05", "state=down", "reason=meshplan-test")
    slurm.scontrol("update", "nodename=gpu14", "state=fail", "reason=meshplan-test")
    with db.session() as s:
        second = sync_cluster(s, cluster.id, cfg=cfg)
        check = WatchRepository(s).get(watch.id).last_check
    assert second.status == "created" and second.revision == 2 and second.diff is not None
    assert second.diff.drained == ["gpu01", "gpu12"] and second.diff.failed == ["gpu05", "gpu14"]
    assert not (second.diff.added or second.diff.removed or second.diff.restored or second.diff.other)
    assert [(p.pool, p.delta) for p in second.diff.pools] == [("h100-sxm-80gb", -32)]
    assert len(second.replan_jobs) == 1 and check == "re-planned: inventory revision 1→2"
    print(f"{second.summary}; watch {watch.id}: {check} (job {second.replan_jobs[0]})")

    # gpu01's slurmd registers again on resume; gpu12 has no slurmd, so Slurm marks it NOT_RESPONDING when
    # undrained: not healthy, whatever its base state (IDLE) says.
    slurm.scontrol("update", "nodename=gpu01", "state=resume")
    slurm.scontrol("update", "nodename=gpu12", "state=undrain")
    slurm.wait_node("gpu01")
    with db.session() as s:
        third = sync_cluster(s, cluster.id, cfg=cfg)
    assert third.diff is not None and third.diff.restored == ["gpu01"] and third.diff.failed == ["gpu12"]
    assert "NOT_RESPONDING" in slurm.node_states()["gpu12"]
    print(third.summary)

    with db.session() as s:  # a controller that cannot be reached: the last revision stays, and says so
        down = sync_cluster(s, cluster.id, SlurmSource(slurm_conf=str(slurm.unreachable_conf())))
        kept = ClusterRepository(s).get(cluster.id)
    assert down.status == "unreachable" and down.revision == 3 and kept.head_revision == 3
    assert "revision 3 kept" in down.summary and kept.last_sync == down.summary
    print(down.summary)

    # The nightly pass (what beat runs, `meshplan replan --now`) syncs the stored source before it re-plans.
    monkeypatch.setattr(workers_service, "database", lambda: db)
    monkeypatch.setattr(workers_service, "settings", lambda: cfg)
    slurm.scontrol("update", "nodename=gpu02", "state=drain", "reason=meshplan-test")
    sent = Sent()
    jobs = replan_all("nightly", cluster.id, sent)
    with db.session() as s:
        head = ClusterRepository(s).head(ClusterRepository(s).get(cluster.id))
        check = WatchRepository(s).get(watch.id).last_check
    assert head is not None and head.number == 4 and head.cause == "sync from slurm: 1 drained, h100-sxm-80gb -8 GPUs"
    assert len(jobs) == 1 and sent.jobs == jobs and check == "re-planned: inventory revision 1→4"
    print(f"nightly: revision {head.number} ({head.cause}); watch {watch.id}: {check} (job {jobs[0]})")
    print(f"(slurm fixture started in {slurm.started_in_s:.2f} s; test {time.monotonic() - t0:.2f} s)")
