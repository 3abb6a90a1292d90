"""A plan's placement through the service: stored with the plan, shown on its page (hosts, leaf switches, NVLink
domains, the shortfalls), and exported as a Slurm script and a Kubernetes JobSet."""

from __future__ import annotations

import yaml
from fastapi.testclient import TestClient

from tests.api.helpers import make_cluster, make_model, ok, solved_job, training_job
from tests.optimizer.placement.helpers import ONE_PER_RACK, nvl_pool

POOL = nvl_pool(ONE_PER_RACK)
PINS = ["tp=8", "dp=15", "pp=2", "vp=1", "mbs=1", "recompute=none"]


def test_plan_page_and_job_exports_show_the_placement(client: TestClient) -> None:
    c, m = make_cluster(client, {"pools": [POOL]}), make_model(client, "llama-3-70b")
    done = solved_job(client, training_job(c, m, 480, 20, seq_len=8192, search={"pins": PINS}))
    plan = ok(client.get(f"/v1/plans/{done['plan_id']}"))
    placement = plan["result"]["placement"]
    assert len(placement["hosts"]) == 60 and any(d.startswith("TP groups") for d in placement["degraded"])
    assert "Placement degraded" in plan["result"]["explanation"]["summary"]

    token = client.headers["Authorization"].split()[1]
    page = client.get(f"/plans/{plan['id']}", cookies={"meshplan_token": token})
    assert page.status_code == 200 and 'id="placement"' in page.text and 'id="placement-degraded"' in page.text
    first = placement["hosts"][0]
    assert f'data-host="{first["name"]}"' in page.text and first["leaf"] in page.text
    assert "split across NVLink domains" in page.text and 'class="host split"' in page.text

    slurm = ok(client.get(f"/v1/plans/{plan['id']}/export/slurm"))
    assert slurm["format"] == "bash" and "--distribution=arbitrary" in slurm["content"]
    assert f"#SBATCH --job-name=meshplan-{plan['id']}" in slurm["content"]
    k8s = ok(client.get(f"/v1/plans/{plan['id']}/export/k8s"))
    jobset = yaml.safe_load(k8s["content"])
    order = jobset["metadata"]["annotations"]["meshplan/host-order"].split(",")
    assert order == [h["name"] for h in placement["hosts"]]
    bad = client.get(f"/v1/plans/{plan['id']}/export/pbs")
    assert bad.status_code == 422
