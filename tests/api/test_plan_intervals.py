"""A plan carries its 80% intervals through the API, and the plan page draws them as bands around the point."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

from tests.api.helpers import TRAINING, make_cluster, make_model, ok, wait_job

NUMBER = r"([\d.e+-]+)"


def test_plan_json_and_page_show_the_intervals(client: TestClient) -> None:
    cluster, model = make_cluster(client), make_model(client)
    body = {"cluster_id": cluster["id"], "model_id": model["id"], "workload": TRAINING, "time_limit_s": 30}
    done = wait_job(client, ok(client.post("/v1/jobs", json=body), 202)["id"])
    plan = ok(client.get(f"/v1/plans/{done['plan_id']}"))
    est = plan["result"]["plan"]["estimate"]
    low, high = est["step_time_interval_s"]
    assert low < est["step_time_s"] < high and "left-out published runs" in est["interval_basis"]
    mlow, mhigh = est["peak_memory_interval_gb"]
    assert mlow < est["peak_memory_gb"] < mhigh

    token = client.headers["Authorization"].split()[1]
    resp = client.get(f"/plans/{plan['id']}", cookies={"meshplan_token": token})
    assert resp.status_code == 200
    page = resp.text
    band = re.search(rf'<td id="step-band">.*?data-low="{NUMBER}" data-high="{NUMBER}".*?data-value="{NUMBER}"', page)
    assert band is not None, "the step time is drawn as a band"
    b_low, b_high, b_point = (float(g) for g in band.groups())
    assert abs(b_low - low) / low < 1e-5 and abs(b_high - high) / high < 1e-5
    assert b_low < b_point < b_high
    assert 'id="interval-basis"' in page and 'class="mem-upper"' in page
