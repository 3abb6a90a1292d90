"""Scheduler inventories over HTTP and on the command line (in-process): imports, a stored sync source, syncing a
live Slurm controller, and bad input answered with one line (422 / exit 2) and nothing stored."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from api.app import create_app
from api.cli import app
from optimizer.spec.cluster_loading import load_cluster_yaml
from store.db import Database
from store.settings import Settings
from tests.api.helpers import name, ok
from tests.slurm_cluster import SlurmCluster

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "optimizer" / "spec" / "scheduler_data"
SINFO = json.loads((DATA / "sinfo-22.05.json").read_text())
TOPOLOGY = (DATA / "scontrol-show-topology-22.05.txt").read_text()
KUBECTL = json.loads((DATA / "kubectl-nodes.json").read_text())
RUNNER = CliRunner()


def test_imports_make_clusters_with_pools_states_and_switches(client: TestClient) -> None:
    slurm = ok(
        client.post(
            "/v1/clusters/import/slurm", params={"name": name("s")}, json={"nodes": SINFO, "topology": TOPOLOGY}
        ),
        201,
    )
    (pool,) = slurm["pools"]
    assert (pool["gpu"], pool["nodes"], pool["nodes_by_state"]) == (
        "H100-SXM-80GB",
        16,
        {"healthy": 10, "drained": 2, "failed": 4},
    )
    assert slurm["inventory"]["pools"][0]["pod_size"] == 8 and slurm["sync_source"] is None
    k8s = ok(client.post("/v1/clusters/import/kubernetes", params={"name": name("k")}, json={"nodes": KUBECTL}), 201)
    assert [(p["gpu"], p["nodes"]) for p in k8s["pools"]] == [("H100-SXM-80GB", 8), ("GB200-186GB", 36)]
    assert k8s["inventory"]["pools"][1]["intra_node"]["domain_size"] == 72


@pytest.mark.parametrize(
    ("path", "body", "loc", "msg"),
    [
        ("slurm", {"nodes": {"nodes": [{"name": "a", "gres": "gpu:tpu9:8", "state": ["IDLE"]}]}},
         ["body", "nodes", "a", "gres"], "unknown GPU type in node a: GRES 'gpu:tpu9:8'; known: A10-24GB"),
        ("slurm", {"nodes": SINFO, "topology": "SwitchName=s1 Nodes=gpu99"},
         ["body", "topology"], "names nodes the inventory lacks: gpu99"),
        ("slurm", {"nodes": SINFO, "topology": "SwitchName=s1 Nodes=gpu01\nSwitchName s2"},
         ["body", "topology"], "line 2: expected Key=Value"),
        ("kubernetes", {"nodes": {"kind": "List", "items": [KUBECTL["items"][1], KUBECTL["items"][1]]}},
         ["body", "nodes"], "duplicate node name dgx-h100-01"),
    ],
)  # fmt: skip
def test_bad_imports_are_422_naming_the_field_and_store_nothing(
    client: TestClient, path: str, body: dict[str, Any], loc: list[str], msg: str
) -> None:
    cluster = name("bad")
    r = client.post(f"/v1/clusters/import/{path}", params={"name": cluster}, json=body)
    assert r.status_code == 422, r.text
    (item,) = r.json()["detail"]
    assert item["loc"] == loc and msg in item["msg"], item
    assert all(c["name"] != cluster for c in ok(client.get("/v1/clusters", params={"limit": 50}))["items"])


def test_sync_source_and_an_unreachable_scheduler(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = ok(
        client.post("/v1/clusters/import/kubernetes", params={"name": name("k")}, json={"nodes": KUBECTL}), 201
    )
    cid = cluster["id"]
    none = client.post(f"/v1/clusters/{cid}/sync", json={})
    assert none.status_code == 422 and "has no sync source" in none.text
    bad = client.put(f"/v1/clusters/{cid}/sync-source", json={"source": {"kind": "slurm", "slurm_conf": "/etc/shadow"}})
    assert bad.status_code == 422 and "must be the absolute path of a .conf file" in bad.text
    source = {"kind": "k8s", "context": "prod"}
    put = ok(client.put(f"/v1/clusters/{cid}/sync-source", json={"source": source}))
    assert put["sync_source"]["context"] == "prod" and put["sync_source"]["kind"] == "k8s"
    monkeypatch.setenv("PATH", "/nonexistent")  # this host has no kubectl
    r = ok(client.post(f"/v1/clusters/{cid}/sync", json={}))
    assert r["status"] == "unreachable" and r["revision"] == 1
    assert r["summary"] == "k8s unreachable: kubectl is not installed on this host; revision 1 kept"
    after = ok(client.get(f"/v1/clusters/{cid}"))
    assert after["revision"] == 1 and after["last_sync"] == r["summary"] and after["last_synced_at"]
    down = client.post("/v1/clusters/sync", params={"name": name("k")}, json={"source": source})
    assert down.status_code == 422 and "kubectl is not installed on this host; nothing was stored" in down.text
    gone = client.post(
        "/v1/clusters/sync",
        params={"name": name("s")},
        json={"source": {"kind": "slurm", "slurm_conf": "/nowhere/slurm.conf"}},
    )
    assert gone.status_code == 422 and gone.json()["detail"][0]["loc"] == ["body", "source", "slurm_conf"]


def test_a_live_slurm_cluster_over_http(
    api_settings: Settings, api_db: Database, tokens: dict[str, str], slurm: SlurmCluster
) -> None:
    # The operator lets the server read the test cluster's files (MESHPLAN_SYNC_FILE_DIRS; none by default).
    app = create_app(api_settings.model_copy(update={"sync_file_dirs": str(slurm.root)}), api_db)
    with TestClient(app, headers={"Authorization": f"Bearer {tokens['write']}"}) as client:
        _a_live_slurm_cluster(client, slurm)


def _a_live_slurm_cluster(client: TestClient, slurm: SlurmCluster) -> None:
    source = {"kind": "slurm", "slurm_conf": str(slurm.conf)}
    made = ok(client.post("/v1/clusters/sync", params={"name": name("live")}, json={"source": source}), 201)
    assert made["pools"][0]["nodes"] == 16 and made["sync_source"]["slurm_conf"] == str(slurm.conf)
    again = ok(client.post(f"/v1/clusters/{made['id']}/sync", json={}))
    assert again["status"] == "unchanged" and again["revision"] == 1
    page = client.get(f"/clusters/{made['id']}")
    assert page.status_code == 200 and "Synced from slurm; last sync" in page.text
    assert "unchanged (revision 1)" in page.text


def test_import_slurm_prints_a_cluster_yaml_with_its_notes() -> None:
    topology = str(DATA / "scontrol-show-topology-22.05.txt")
    r = RUNNER.invoke(app, ["import-slurm", str(DATA / "sinfo-22.05.json"), "--topology", topology, "--name", "lab"])
    assert r.exit_code == 0, r.output
    assert "# 2 node(s) without GPUs ignored, e.g. cpu01, cpu02" in r.stdout
    spec = load_cluster_yaml(r.stdout)
    assert spec.name == "lab" and spec.pools[0].pod_size == 8 and spec.healthy_gpus == 80


def test_import_k8s_takes_the_nic_figures_it_is_given() -> None:
    k = RUNNER.invoke(app, ["import-k8s", "-", "--nic-gbps", "200"], input=json.dumps(KUBECTL))
    assert k.exit_code == 0, k.output
    assert yaml.safe_load(k.stdout)["pools"][1]["inter_node"] == {"nics_per_node": 4, "gbits_per_s": 200.0}


@pytest.mark.parametrize(
    ("args", "stdin", "message"),
    [
        (["import-slurm", str(DATA / "sinfo-22.05.json"), "--topology", str(DATA / "sinfo-22.05.json")], None,
         "error: topology: line 1: expected Key=Value"),
        (["import-slurm", str(DATA / "nothing.json")], None, "error: nodes: cannot read"),
        (["import-k8s", "-"], "{", "error: nodes: - is not valid JSON"),
        (["import-k8s", "-", "--nics-per-node", "99"], "{}", "error: --nics-per-node: must be between 0 and 64"),
        (["sync", "1", "--from", "pbs"], None, "error: --from: must be slurm or k8s (got 'pbs')"),
    ],
)  # fmt: skip
def test_bad_input_exits_2_with_one_line(args: list[str], stdin: str | None, message: str) -> None:
    r = RUNNER.invoke(app, args, input=stdin)
    assert r.exit_code == 2 and r.output.startswith(message) and r.output.count("\n") == 1, r.output


def test_a_token_cannot_make_the_server_read_a_file_it_names(client: TestClient) -> None:
    """`POST /v1/clusters/sync` naming /etc/resolv.conf as a topology file is a 422 naming the field, without
    reading it (no directory is allowed by default) and without quoting it [issue 59 item 4]."""
    r = client.post(
        "/v1/clusters/sync",
        params={"name": name("x")},
        json={"source": {"kind": "slurm", "topology_file": "/etc/resolv.conf"}},
    )
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["loc"] == ["body", "source", "topology_file"]
    assert "MESHPLAN_SYNC_FILE_DIRS" in r.text and "nameserver" not in r.text
    cid = ok(client.post("/v1/clusters/import/kubernetes", params={"name": name("k")}, json={"nodes": KUBECTL}), 201)
    put = client.put(
        f"/v1/clusters/{cid['id']}/sync-source", json={"source": {"kind": "k8s", "kubeconfig": "/root/.kube/config"}}
    )
    assert put.status_code == 422 and put.json()["detail"][0]["loc"] == ["body", "source", "kubeconfig"]
