"""One export, everywhere [issue 53 §2]: for every plan kind (training, a single serving replica, an SLA fleet, a
disaggregated prefill / decode fleet) and every framework, engine and scheduler that applies, the plan is made
through the service (the real app in-process on a migrated SQLite file, jobs on its thread) and the export is read
four ways: the API's Export answers (/export, /fleet-export), the plan page's Copy text (each `<pre
class="export">`'s textContent), `meshplan export PLAN TOOL` against the served app, and `meshplan plan ...
--export TOOL` run on the same inputs. All must be the same bytes (Export.script()), in the same order; a tool
that cannot run a knob of the plan is refused on every path with the same rule. The job scripts (Slurm, Kubernetes)
carry the plan's framework export line for line."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from api.app import create_app
from api.cli import app as cli
from optimizer.exports.launch import Export
from store.db import Database
from store.migrate import upgrade
from store.repositories.tokens import TokenRepository
from store.settings import Settings
from tests.api.helpers import ok, wait_job
from tests.served import served

H100 = {"name": "h100", "gpu": "H100-SXM-80GB", "gpus_per_node": 8, "price_per_gpu_hour": 2.5}
TIME_LIMIT_S = 30
SERVING = {"prompt_len": 2048, "output_len": 256}
SLA = {**SERVING, "rate": 13, "ttft_ms": 2000, "tpot_ms": 60, "objective": "gpus"}


@dataclass(frozen=True)
class Kind:
    """A plan kind: its model preset, nodes of H100, the API workload and the same inputs as `meshplan plan` options."""

    model: str
    nodes: int
    workload: dict[str, Any]
    options: list[str]
    tools: tuple[str, ...]
    refused: tuple[str, ...] = field(default=())


SERVING_TOOLS = ("vllm", "sglang", "trtllm")
SERVING_OPTIONS = ["--mode", "inference", "--prompt-len", "2048", "--output-len", "256"]
SLA_OPTIONS = [*SERVING_OPTIONS, "--rate", "13", "--ttft-ms", "2000", "--tpot-ms", "60", "--objective", "gpus"]
KINDS = {
    # DeepSpeed's plan runs under every framework's export and both schedulers
    "training": Kind(
        "llama-3-8b",
        2,
        {"mode": "training", "global_batch_size": 64, "seq_len": 4096, "framework": "deepspeed"},
        ["--gbs", "64", "--seq-len", "4096", "--framework", "deepspeed"],
        ("megatron", "deepspeed", "torchtitan", "slurm", "k8s"),
    ),
    # Megatron-LM's plan (interleaved, TP comm overlap): DeepSpeed cannot run it, on every path alike
    "training-megatron": Kind(
        "llama-3-8b",
        2,
        {"mode": "training", "global_batch_size": 64, "seq_len": 4096, "framework": "megatron"},
        ["--gbs", "64", "--seq-len", "4096", "--framework", "megatron"],
        ("megatron", "torchtitan", "slurm", "k8s"),
        refused=("deepspeed",),
    ),
    "replica": Kind(
        "llama-3-8b",
        2,
        {"mode": "inference", **SERVING, "batch": 8, "objective": "throughput", "engine": "vllm"},
        [*SERVING_OPTIONS, "--batch", "8", "--objective", "throughput", "--engine", "vllm"],
        SERVING_TOOLS,
    ),
    # TP4 and TP8 replicas of 1,024 sequences each (the fleet of issue 53's introduction)
    "sla-fleet": Kind(
        "llama-3-70b",
        4,
        {"mode": "inference", **SLA, "engine": "vllm"},
        [*SLA_OPTIONS, "--engine", "vllm"],
        SERVING_TOOLS,
    ),
    "disaggregated": Kind(
        "llama-3-70b",
        4,
        {"mode": "inference", **SLA, "engine": "sglang", "disaggregation": "on"},
        [*SLA_OPTIONS, "--engine", "sglang", "--disaggregation", "on"],
        SERVING_TOOLS,
    ),
}
RUNNER = CliRunner()
PRE = re.compile(r'<pre class="export" id="export-([a-z0-9]+)(?:-(\d+))?">(.*?)</pre>', re.S)


@dataclass
class Service:
    client: TestClient
    url: str
    token: str
    inventories: Path
    plans: dict[str, int] = field(default_factory=dict)
    models: dict[str, int] = field(default_factory=dict)
    pages: dict[int, str] = field(default_factory=dict)


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    root = tmp_path_factory.mktemp("one-export")
    url = f"sqlite:///{root / 'meshplan.db'}"
    upgrade(url)
    db = Database(url)
    with db.session() as s:
        _row, token = TokenRepository(s).create("writer", ["write"])
    cfg = Settings(database_url=url, max_time_limit_s=120, embedded_jobs="thread")
    with TestClient(create_app(cfg, db)) as client, served(create_app(cfg, db)) as host:
        client.headers["Authorization"] = f"Bearer {token}"
        yield Service(client, f"http://{host}", token, root)
    db.dispose()


def inventory(svc: Service, nodes: int) -> Path:
    """The cluster's inventory as a file `meshplan plan --cluster` reads (the API takes the same pools)."""
    path = svc.inventories / f"h100x{nodes}.yaml"
    path.write_text(yaml.safe_dump({"name": f"h100x{nodes}", "pools": [{**H100, "nodes": nodes}]}))
    return path


def stored_plan(svc: Service, name: str) -> int:
    """The plan of kind `name`, made once through the service: a cluster of its pools, its model stored under its
    preset's name (what a serving engine loads is then the preset's Hugging Face id on every path)."""
    if name in svc.plans:
        return svc.plans[name]
    kind, c = KINDS[name], svc.client
    if kind.model not in svc.models:
        svc.models[kind.model] = ok(c.post("/v1/models", json={"name": kind.model, "preset": kind.model}), 201)["id"]
    pools = yaml.safe_load(inventory(svc, kind.nodes).read_text())["pools"]
    cluster = ok(c.post("/v1/clusters", json={"name": f"{name}-cluster", "inventory": {"pools": pools}}), 201)
    body = {
        "cluster_id": cluster["id"],
        "model_id": svc.models[kind.model],
        "workload": kind.workload,
        "time_limit_s": TIME_LIMIT_S,
    }
    done = wait_job(c, ok(c.post("/v1/jobs", json=body), 202)["id"], timeout=120)
    assert done["status"] == "succeeded", done
    svc.plans[name] = done["plan_id"]
    return done["plan_id"]


def api_exports(svc: Service, plan_id: int, tool: str) -> list[Export]:
    """The API's answer for `tool`: an SLA fleet's serving launches at /fleet-export, else the one /export."""
    plan = ok(svc.client.get(f"/v1/plans/{plan_id}"))
    if plan["result"]["fleet"] and tool in SERVING_TOOLS:
        return [Export.model_validate(e) for e in ok(svc.client.get(f"/v1/plans/{plan_id}/fleet-export/{tool}"))]
    return [Export.model_validate(ok(svc.client.get(f"/v1/plans/{plan_id}/export/{tool}")))]


def page_text(svc: Service, plan_id: int) -> str:
    """The plan page as served (rendered once per plan: a training plan's page takes about a second)."""
    if plan_id not in svc.pages:
        page = svc.client.get(f"/plans/{plan_id}", cookies={"meshplan_token": svc.token})
        assert page.status_code == 200, page.text
        svc.pages[plan_id] = page.text
    return svc.pages[plan_id]


def page_copies(svc: Service, plan_id: int) -> dict[str, list[str]]:
    """What each Copy button copies (the `<pre>`'s textContent), per tool in page order."""
    out: dict[str, list[str]] = {}
    for tool, _k, text in PRE.findall(page_text(svc, plan_id)):
        out.setdefault(tool, []).append(html.unescape(text))
    return out


def printed_in_order(printed: str, exports: list[Export]) -> None:
    """Each export is printed as its tool's name then its bytes (api/cli_plan.py print_export), in the API's order."""
    at = 0
    for k, e in enumerate(exports):
        block = f"{e.tool}:\n{e.script()}"
        found = printed.find(block, at)
        assert found >= 0, f"export {k + 1} of {len(exports)} ({e.tool}) is not printed as the API answers it:\n{block}"
        at = found + len(block)
    assert printed.count(f"{exports[0].tool}:\n") == len(exports), printed


CASES = [(name, tool) for name, kind in KINDS.items() for tool in kind.tools]


@pytest.mark.parametrize(("name", "tool"), CASES)
def test_the_page_copies_the_api_export(service: Service, name: str, tool: str) -> None:
    plan_id = stored_plan(service, name)
    served_ = [e.script() for e in api_exports(service, plan_id, tool)]
    assert page_copies(service, plan_id).get(tool) == served_


@pytest.mark.parametrize(("name", "tool"), CASES)
def test_meshplan_export_prints_the_api_export(service: Service, name: str, tool: str) -> None:
    plan_id = stored_plan(service, name)
    r = RUNNER.invoke(cli, ["export", str(plan_id), tool, "--url", service.url, "--token", service.token])
    assert r.exit_code == 0, r.output
    printed_in_order(r.stdout, api_exports(service, plan_id, tool))


@pytest.mark.parametrize(("name", "tool"), CASES)
def test_meshplan_plan_prints_the_stored_plans_export(service: Service, name: str, tool: str) -> None:
    """The same inputs on the command line plan the same configuration and print the same bytes; a scheduler's job
    is named after the stored plan (meshplan-ID) where the command line's, never stored, is `meshplan`."""
    plan_id, kind = stored_plan(service, name), KINDS[name]
    args = ["plan", "--model", kind.model, "--cluster", str(inventory(service, kind.nodes)), *kind.options]
    r = RUNNER.invoke(cli, [*args, "--time-limit", str(TIME_LIMIT_S), "--export", tool])
    assert r.exit_code == 0, r.output
    exports = api_exports(service, plan_id, tool)
    if tool in ("slurm", "k8s"):
        named = f"meshplan-{plan_id}"
        exports = [e.model_copy(update={"content": e.content.replace(named, "meshplan")}) for e in exports]
    printed_in_order(r.stdout, exports)


def test_meshplan_export_writes_the_bytes_and_the_json(service: Service, tmp_path: Path) -> None:
    """`--output` writes exactly Export.script() (one export; an SLA fleet's several are refused, exit 2) and
    `--json` carries the API's Export objects."""
    connect = ["--url", service.url, "--token", service.token]
    plan_id, fleet_id = stored_plan(service, "training"), stored_plan(service, "sla-fleet")
    path = tmp_path / "megatron.args"
    r = RUNNER.invoke(cli, ["export", str(plan_id), "megatron", "-o", str(path), *connect])
    assert r.exit_code == 0, r.output
    assert path.read_bytes() == api_exports(service, plan_id, "megatron")[0].script().encode()
    r = RUNNER.invoke(cli, ["export", str(fleet_id), "vllm", "-o", str(tmp_path / "fleet"), *connect])
    assert r.exit_code == 2 and "--output" in r.stderr and not (tmp_path / "fleet").exists(), r.output
    r = RUNNER.invoke(cli, ["export", str(fleet_id), "vllm", "--json", *connect])
    assert r.exit_code == 0, r.output
    printed = [Export.model_validate(e) for e in json.loads(r.stdout)["exports"]]
    assert printed == api_exports(service, fleet_id, "vllm") and len(printed) > 1
    r = RUNNER.invoke(cli, ["export", str(plan_id), "tgi", *connect])
    assert r.exit_code == 2 and "unknown TOOL 'tgi'" in r.stderr, r.output


@pytest.mark.parametrize("name", [n for n, k in KINDS.items() if k.refused])
def test_a_tool_that_cannot_run_the_plan_is_refused_alike(service: Service, name: str) -> None:
    plan_id, kind = stored_plan(service, name), KINDS[name]
    page = page_text(service, plan_id)
    for tool in kind.refused:
        answer = service.client.get(f"/v1/plans/{plan_id}/export/{tool}")
        assert answer.status_code == 422, answer.text
        rule = re.search(rf'data-tool="{tool}">Not available: (.*?)</p>', page)
        assert rule is not None, f"the page does not say why {tool} is unavailable"
        assert html.unescape(rule.group(1)) in answer.text
        r = RUNNER.invoke(cli, ["export", str(plan_id), tool, "--url", service.url, "--token", service.token])
        assert r.exit_code == 2 and html.unescape(rule.group(1)) in r.output, r.output


@pytest.mark.parametrize("name", ["training", "training-megatron"])
def test_the_job_scripts_carry_the_frameworks_export(service: Service, name: str) -> None:
    """Every line of the plan's framework export (its arguments, its config file) is a line of the Slurm script and
    of the JobSet's rank script."""
    plan_id = stored_plan(service, name)
    framework = ok(service.client.get(f"/v1/plans/{plan_id}"))["result"]["framework"]
    plain = api_exports(service, plan_id, framework)[0]
    for scheduler in ("slurm", "k8s"):
        job = api_exports(service, plan_id, scheduler)[0].content
        lines = {line.strip() for line in job.splitlines()}
        missing = [line for line in plain.content.splitlines() if line.strip() and line.strip() not in lines]
        assert not missing, (scheduler, missing)


@pytest.mark.parametrize("name", ["sla-fleet", "disaggregated"])
def test_the_fleet_page_shows_every_group_and_the_fleets_latency(service: Service, name: str) -> None:
    """One Copy block per replica group (and the front end of a disaggregated fleet), each with the group's own
    sequence limit; the header's TTFT / TPOT are the fleet's at the planned load, not one replica's."""
    plan_id = stored_plan(service, name)
    fleet = ok(service.client.get(f"/v1/plans/{plan_id}"))["result"]["fleet"]
    page = page_text(service, plan_id)
    blocks = [(tool, k) for tool, k, _text in PRE.findall(page)]
    front = 1 if fleet["mode"] == "disaggregated" else 0
    groups = len(fleet["groups"])
    parts = groups + front
    ids = [str(j + 1) for j in range(parts)] if parts > 1 else [""]  # export-TOOL-K, or export-TOOL for one
    for tool in SERVING_TOOLS:
        assert [k for t, k in blocks if t == tool] == ids, (tool, blocks)
    vllm = page_copies(service, plan_id)["vllm"]
    seqs = [int(m) for text in vllm for m in re.findall(r"--max-num-seqs (\d+)", text)]
    assert seqs == [g["shape"]["max_seqs"] for g in fleet["groups"]], seqs
    headline = page[page.index('id="headline"') : page.index("</table>", page.index('id="headline"'))]
    latency = re.search(r'id="fleet-latency" data-ttft="([^"]+)" data-tpot="([^"]+)"', headline)
    assert latency is not None, headline
    assert (float(latency.group(1)), float(latency.group(2))) == (fleet["ttft_p90_s"], fleet["tpot_s"])
    assert f"{1000 * fleet['ttft_p90_s']:.0f} ms / {1000 * fleet['tpot_s']:.1f} ms" in headline
    assert 'id="ttft-band"' not in headline and "TTFT / TPOT</th>" not in headline  # the replica's own
