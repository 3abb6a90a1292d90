"""The plan page's Copy button copies the export's bytes: each `<pre class="export">` holds, once HTML-unescaped
(its textContent, what the button copies), exactly Export.script() of the API's /export/{tool} answer, and a
Megatron launch with a 64-stage pipeline layout reaches its launcher whole."""

from __future__ import annotations

import html
import re

from fastapi.testclient import TestClient

from optimizer.exports.launch import Export
from tests.api.helpers import make_cluster, make_model, ok, solved_job, training_job
from tests.optimizer.exports.test_export_paste import after_launcher, argv, flag_values

POOL = {"name": "h100", "gpu": "H100-SXM-80GB", "nodes": 32, "gpus_per_node": 8}
PINS = ["tp=8", "pp=16", "vp=4", "dp=2", "cp=1", "mbs=1"]


def test_copy_text_is_the_api_export_byte_for_byte(client: TestClient) -> None:
    c, m = make_cluster(client, {"pools": [POOL]}), make_model(client, "llama-3.1-405b")
    done = solved_job(client, training_job(c, m, 512, 20, search={"pins": PINS}))
    token = client.headers["Authorization"].split()[1]
    page = client.get(f"/plans/{done['plan_id']}", cookies={"meshplan_token": token}).text
    copied = {
        tool: html.unescape(text)
        for tool, text in re.findall(r'<pre class="export" id="export-([a-z0-9]+)">(.*?)</pre>', page, re.S)
    }
    assert {"megatron", "torchtitan", "slurm", "k8s"} <= set(copied)  # DeepSpeed runs no interleaved schedule
    for tool, text in copied.items():
        served = Export.model_validate(ok(client.get(f"/v1/plans/{done['plan_id']}/export/{tool}")))
        assert text == served.script(), tool
    flags = flag_values(argv(after_launcher(copied["megatron"], "pretrain_gpt"), "pretrain_gpt"))
    layout = flags["--pipeline-model-parallel-layout"]
    assert len(layout) == 1 and len(layout[0]) > 150 and layout[0].count("|") == 63
