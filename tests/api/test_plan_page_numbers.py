"""Numbers on the plan and job pages that add up (issue 48 §5, §10): one bubble figure, the job's own elapsed time
beside its search's, a gap wherever the plan is above the bound, no raw Python values."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

from api.pages.router import shown
from tests.api.helpers import make_cluster, make_model, ok, solved_job, training_job

NODE = {"pools": [{"name": "h100", "gpu": "H100-SXM-80GB", "nodes": 2, "gpus_per_node": 8}]}


def test_plan_and_job_pages_state_one_bubble_and_the_job_time(client: TestClient) -> None:
    c, m = make_cluster(client, NODE), make_model(client)
    done = solved_job(client, training_job(c, m, 64, 20, seq_len=2048, search={"pins": ["pp=2", "tp=8"]}))
    token = client.headers["Authorization"].split()[1]
    plan = ok(client.get(f"/v1/plans/{done['plan_id']}"))
    page = client.get(f"/plans/{plan['id']}", cookies={"meshplan_token": token}).text
    bubbles = re.findall(r"gaps are the bubble: ([^)]*)\)", page)
    assert len(bubbles) == 1 and "% of the step, as the step time below prices it" in bubbles[0], bubbles
    step = plan["result"]["plan"]["estimate"]
    share = 100 * step["breakdown"]["bubble"] / step["step_time_s"]
    assert f"{share:.1f}% of the step" in bubbles[0]
    assert not re.search(r"<td>(True|False|None|\[)", page), "raw Python values on the plan page"
    job = client.get(f"/jobs/{done['id']}", cookies={"meshplan_token": token}).text
    elapsed = re.search(r'id="elapsed">([\d.]+) s \(the search: ([\d.]+) s', job)
    assert elapsed is not None, job[job.find("elapsed") - 100 : job.find("elapsed") + 300]
    assert float(elapsed[1]) >= float(elapsed[2]) - 0.05  # the job's time holds its search's
    assert "None" not in re.findall(r"<th>workload</th><td>([^<]*)", job)[0]


def test_values_are_shown_in_words() -> None:
    assert [shown(True), shown(False), shown(None), shown([1, 2]), shown([]), shown(3)] == [
        "yes",
        "no",
        "–",
        "1, 2",
        "none",
        "3",
    ]
