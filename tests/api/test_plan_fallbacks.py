"""A solved training plan's fallbacks in the API's plan JSON, on its page and from `meshplan plan --fallbacks`."""

from __future__ import annotations

import json

from fastapi.testclient import TestClient

from tests.api.helpers import make_cluster, make_model, ok, solved_job, training_job

FOUR_NODES = {"pools": [{"name": "h100", "gpu": "H100-SXM-80GB", "nodes": 4, "gpus_per_node": 8}]}


def test_the_plan_json_has_the_fallbacks_and_the_page_lists_them(client: TestClient) -> None:
    c, m = make_cluster(client, FOUR_NODES), make_model(client, "llama-3-8b")
    done = solved_job(client, training_job(c, m, 64, 20))
    plan = ok(client.get(f"/v1/plans/{done['plan_id']}"))
    found = plan["result"]["fallbacks"]
    kinds = {f["scenario"] for f in found}
    assert {"node", "two_nodes"} <= kinds and plan["result"]["fallbacks_time_s"] > 0
    one = next(f for f in found if f["scenario"] == "node" and f["preferred"])
    assert one["healthy_gpus"] == {"h100": 24} and one["step_time_s"] > 0 and one["diff"]
    assert 0 < one["goodput_tokens_per_s"] < one["tokens_per_s"]

    token = client.headers["Authorization"].split()[1]
    page = client.get(f"/plans/{plan['id']}", cookies={"meshplan_token": token})
    assert page.status_code == 200 and 'id="fallbacks"' in page.text
    assert page.text.count('class="fallback') == len(found)
    assert one["label"] in page.text and one["diff"] in page.text
    assert 'data-scenario="two_nodes"' in page.text and "(preferred)" in page.text
    assert page.text.count('class="num fallback-goodput"') == len(found) and " tok/s</td>" in page.text

    off = solved_job(client, training_job(c, m, 64, 20, search={"fallbacks": False}))
    bare = ok(client.get(f"/v1/plans/{off['plan_id']}"))
    assert bare["result"]["fallbacks"] == []
    page = client.get(f"/plans/{bare['id']}", cookies={"meshplan_token": token})
    assert page.status_code == 200 and 'id="fallbacks"' not in page.text


def test_the_cli_plan_computes_fallbacks_when_asked() -> None:
    from typer.testing import CliRunner

    from api.cli import app

    runner = CliRunner()
    args = ["plan", "--model", "llama-3-8b", "--cluster", "dgx-h100:4", "--gbs", "64", "--seq-len", "4096"]
    doc = json.loads(runner.invoke(app, [*args, "--time-limit", "10", "--fallbacks", "--json"]).output)
    kinds = {f["scenario"] for f in doc["fallbacks"]}
    assert {"node", "two_nodes"} <= kinds and doc["fallbacks_time_s"] > 0
    assert all(f["healthy_gpus"] for f in doc["fallbacks"])
    text = runner.invoke(app, [*args, "--time-limit", "10", "--fallbacks"])
    assert text.exit_code == 0 and "Fallbacks (computed in" in text.output and "one node of pool" in text.output
    plain = json.loads(runner.invoke(app, [*args, "--time-limit", "10", "--json"]).output)
    assert plain["fallbacks"] == [] and plain["fallbacks_time_s"] is None  # not asked: not computed
