"""The web pages in a real browser (Debian's headless Chromium through chromedriver), with data from real planning
jobs: each page loads, a screenshot is taken, and the figures' numbers match the plan's JSON."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from optimizer.exports.launch import Export
from tests.api.helpers import make_model, name, ok, training_job, wait_job
from tests.databases import require


@pytest.fixture(scope="module")
def browser() -> Iterator[webdriver.Chrome]:
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not chromium or not driver:
        require("Debian's chromium and chromium-driver are not installed (make test installs them)")
    opts = Options()
    opts.binary_location = str(chromium)
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1200,1600",
    ):
        opts.add_argument(arg)
    b = webdriver.Chrome(service=Service(executable_path=str(driver)), options=opts)
    yield b
    b.quit()


@pytest.fixture(scope="module")
def planned(client: TestClient) -> dict[str, Any]:
    """Two real planning jobs: before and after a node fails."""
    inv = {"pools": [{"name": "h100", "gpu": "H100-SXM-80GB", "nodes": 4, "gpus_per_node": 8}]}
    cluster = ok(client.post("/v1/clusters", json={"name": name("web"), "inventory": inv}), 201)
    model = make_model(client, "llama-2-70b")
    body = training_job(cluster, model, gbs=256, time_limit_s=60)
    first = wait_job(client, ok(client.post("/v1/jobs", json=body), 202)["id"], timeout=120)
    ok(client.patch(f"/v1/clusters/{cluster['id']}/nodes/{cluster['pools'][0]['name']}-002", json={"state": "failed"}))
    second = wait_job(client, ok(client.post("/v1/jobs", json=body), 202)["id"], timeout=120)
    assert first["status"] == second["status"] == "succeeded"
    plan = ok(client.get(f"/v1/plans/{second['plan_id']}"))
    return {"cluster": cluster, "model": model, "job": second, "plan": plan, "first_plan_id": first["plan_id"]}


def shot(b: webdriver.Chrome, tmp: Path, label: str) -> Path:
    path = tmp / f"{label}.png"
    assert b.save_screenshot(str(path))
    assert path.stat().st_size > 5_000, path  # a rendered page, not a blank one
    return path


def test_login_then_history(
    browser: webdriver.Chrome, server: str, tokens: dict[str, str], planned: dict[str, Any], tmp_path: Path
) -> None:
    cluster_id = planned["cluster"]["id"]
    browser.get(f"{server}/plans?cluster_id={cluster_id}")
    assert "/login" in browser.current_url  # no token yet
    browser.find_element(By.NAME, "token").send_keys(tokens["read"])
    browser.find_element(By.CSS_SELECTOR, "form button[type=submit]").click()
    # the click returns before the form's redirect lands: wait for the navigation, then assert where it went
    WebDriverWait(browser, 10).until(lambda b: "/login" not in b.current_url)
    assert f"/plans?cluster_id={cluster_id}" in browser.current_url
    rows = browser.find_elements(By.CSS_SELECTOR, "#history tr[data-plan]")
    assert [int(r.get_attribute("data-plan") or 0) for r in rows] == [planned["plan"]["id"], planned["first_plan_id"]]
    assert "inventory_change" not in rows[0].text and "user" in rows[0].text
    assert f"{100 * planned['plan']['mfu']:.1f}%" in rows[0].text
    shot(browser, tmp_path, "history")


def test_plan_page_figures_match_the_plan(
    browser: webdriver.Chrome, server: str, client: TestClient, planned: dict[str, Any], tmp_path: Path
) -> None:
    plan = planned["plan"]
    best = plan["result"]["plan"]
    cfg, est = best["config"], best["estimate"]
    browser.get(f"{server}/plans/{plan['id']}")
    shot(browser, tmp_path, "plan")
    # the pipeline timeline has one row per stage, and forward and backward blocks
    rows = browser.find_elements(By.CSS_SELECTOR, "svg.timeline g.stage-row")
    assert len(rows) == cfg["pp"] == len(est["stages"])
    assert browser.find_elements(By.CSS_SELECTOR, "svg.timeline rect.block.F")
    assert browser.find_elements(By.CSS_SELECTOR, "svg.timeline rect.block.B")
    # memory bars: one per stage, totals as in the JSON, the parts add up to the total
    bars = browser.find_elements(By.CSS_SELECTOR, "svg.memory g.mem-bar")
    assert len(bars) == len(est["stages"])
    for bar, stage in zip(bars, est["stages"], strict=True):
        total = float(bar.get_attribute("data-total-gb") or "nan")
        assert total == pytest.approx(stage["memory_gb"]["total"], abs=1e-3)
        parts = [float(p.get_attribute("data-gb") or 0) for p in bar.find_elements(By.CSS_SELECTOR, "rect.mem-part")]
        assert sum(parts) == pytest.approx(total, abs=0.01)
        assert f"{stage['memory_gb']['total']:.1f} / {stage['memory_gb']['capacity']:.0f} GB" in bar.text
    # the device mesh colours exactly the plan's GPUs, and outlines its TP groups
    gpus = browser.find_elements(By.CSS_SELECTOR, "svg.mesh rect.gpu[data-stage]")
    assert len(gpus) == est["gpus"] == cfg["tp"] * cfg["pp"] * cfg["dp"] * cfg["cp"]
    groups = browser.find_elements(By.CSS_SELECTOR, "svg.mesh rect.tp-group")
    assert len(groups) >= est["gpus"] // 8
    # headline numbers, breakdown, explanation, alternatives, exports
    assert float(browser.find_element(By.ID, "objective").get_attribute("data-value") or 0) == pytest.approx(
        plan["objective_value"]
    )
    breakdown = browser.find_element(By.ID, "breakdown").text
    assert "forward" in breakdown and "backward" in breakdown
    assert browser.find_element(By.ID, "explanation").text.startswith(plan["result"]["explanation"]["summary"][:30])
    # the environment Megatron's validate_args requires (tp > 1), then pretrain_gpt.py's arguments
    assert browser.find_element(By.ID, "export-megatron").text.startswith("export CUDA_DEVICE_MAX_CONNECTIONS=1\n--")
    # the Copy button copies the <pre>'s textContent: the API's export, byte for byte (Export.script())
    copied = browser.execute_script("return document.getElementById('export-megatron').textContent")
    assert copied == Export.model_validate(ok(client.get(f"/v1/plans/{plan['id']}/export/megatron"))).script()
    # megatron, deepspeed, torchtitan: each either exports (a copy button) or says which knob of the plan it lacks;
    # the Slurm script and the Kubernetes JobSet run the plan's own framework on its placement
    copies = len(browser.find_elements(By.CSS_SELECTOR, "button.copy"))
    unavailable = browser.find_elements(By.CSS_SELECTOR, ".unavailable-export")
    assert copies + len(unavailable) == 5 and copies >= 3
    assert browser.find_element(By.ID, "export-slurm").text.startswith("#!/bin/bash")
    assert browser.find_element(By.ID, "export-k8s").text.startswith("apiVersion: jobset.x-k8s.io/v1alpha2")
    # the placement: one row per placed host, as many as the plan's GPUs need
    hosts = browser.find_elements(By.CSS_SELECTOR, "#placement tr.host")
    assert len(hosts) == len(plan["result"]["placement"]["hosts"]) and len(hosts) >= est["gpus"] // 8
    assert all("is not available in" in u.text for u in unavailable)


def test_fleet_page_copies_each_replica_group(
    browser: webdriver.Chrome, server: str, client: TestClient, tokens: dict[str, str], tmp_path: Path
) -> None:
    """An SLA fleet of TP4 and TP8 replicas: every Copy button targets its own `<pre>`, and the vLLM buttons copy
    the API's fleet export, one launch per replica group [issue 53 §2]."""
    pools = [{"name": "h100", "gpu": "H100-SXM-80GB", "nodes": 4, "gpus_per_node": 8}]
    cluster = ok(client.post("/v1/clusters", json={"name": name("fleet"), "inventory": {"pools": pools}}), 201)
    model = make_model(client, "llama-3-70b")
    sla = {"prompt_len": 2048, "output_len": 256, "rate": 13, "ttft_ms": 2000, "tpot_ms": 60, "objective": "gpus"}
    body = {"cluster_id": cluster["id"], "model_id": model["id"], "workload": {"mode": "inference", **sla}}
    done = wait_job(client, ok(client.post("/v1/jobs", json=body), 202)["id"], timeout=120)
    assert done["status"] == "succeeded", done
    browser.get(f"{server}/login")  # signed in whatever ran before (the cookie /login sets)
    browser.add_cookie({"name": "meshplan_token", "value": tokens["read"]})
    browser.get(f"{server}/plans/{done['plan_id']}")
    shot(browser, tmp_path, "fleet")
    targets = [b.get_attribute("data-target") or "" for b in browser.find_elements(By.CSS_SELECTOR, "button.copy")]
    assert len(set(targets)) == len(targets) and all(browser.find_elements(By.ID, t) for t in targets), targets
    fleet = ok(client.get(f"/v1/plans/{done['plan_id']}/fleet-export/vllm"))
    copied = [
        browser.execute_script(f"return document.getElementById('{t}').textContent")
        for t in targets
        if t.startswith("export-vllm")
    ]
    assert copied == [Export.model_validate(e).script() for e in fleet]
    assert browser.find_element(By.ID, "fleet-latency").text.endswith("(worst group at the planned load)")


def test_diff_cluster_model_and_job_pages(
    browser: webdriver.Chrome, server: str, planned: dict[str, Any], tmp_path: Path
) -> None:
    plan = planned["plan"]
    browser.get(f"{server}/plans/{plan['id']}/diff")
    shot(browser, tmp_path, "diff")
    changed = [r.text for r in browser.find_elements(By.CSS_SELECTOR, "#diff tr.changed")]
    assert any(r.startswith("GPUs") for r in changed), changed
    assert "failed" in browser.find_element(By.TAG_NAME, "main").text  # the inventory change is named

    browser.get(f"{server}/clusters/{planned['cluster']['id']}")
    shot(browser, tmp_path, "cluster")
    text = browser.find_element(By.TAG_NAME, "main").text
    assert "failed" in text and "24 healthy of 32 GPUs" in text

    browser.get(f"{server}/models/{planned['model']['id']}")
    assert "80 layers" in browser.find_element(By.TAG_NAME, "main").text

    browser.get(f"{server}/jobs/{planned['job']['id']}")
    shot(browser, tmp_path, "job")
    assert browser.find_element(By.ID, "job-status").text == "succeeded"
    assert browser.find_element(By.ID, "best").text != "–"

    browser.set_window_size(420, 1200)  # a narrow window still shows the figures inside the page width
    browser.get(f"{server}/plans/{plan['id']}")
    width = browser.execute_script("return document.documentElement.scrollWidth")
    assert width <= 440, width
    browser.set_window_size(1200, 1600)
