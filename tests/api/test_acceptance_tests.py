"""/v1/clusters/{id}/acceptance-tests: nccl-tests and mamf-finder outputs posted as printed, answered with their
figures against the cost model's; bad input is a 422 naming the field or the line with nothing stored; a cluster
with acceptance tests and no training run calibrates to their figures; `meshplan measure-cluster` stores all its
files or none."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import Result
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from api.cli import app
from tests.api.helpers import make_cluster, ok
from tests.optimizer.calibration.gemm_output import A100, mamf_output
from tests.optimizer.calibration.nccl_output import nccl_output

CALIBRATION = Path(__file__).parents[1] / "optimizer" / "calibration"
NCCL_SINGLE = (CALIBRATION / "nccl" / "all_reduce_8xH100.txt").read_text()  # NVLink SHARP: 478.5 GB/s
NCCL_MULTI = (CALIBRATION / "nccl" / "all_reduce_4x8xH100.txt").read_text()  # 351.4 GB/s over 8 x 400G per node
NCCL_GATHER = nccl_output("all_gather", 1, 8, 356.0, latency_us=5.0)  # the links alone: 0.99 x 360 GB/s
GEMM_BF16 = (CALIBRATION / "gemm" / "mamf_h100_bf16.txt").read_text()  # 794.5 TFLOP/s
POOL = {
    "name": "h100",
    "gpu": "H100-SXM-80GB",
    "nodes": 4,
    "gpus_per_node": 8,
    "inter_node": {"nics_per_node": 8, "gbits_per_s": 400},
}
TWO_POOLS = {"pools": [POOL, {**POOL, "name": "h100b"}]}


def _post(c: TestClient, cluster_id: int, kind: str, text: str, **params: Any) -> Any:
    return c.post(
        f"/v1/clusters/{cluster_id}/acceptance-tests",
        params={"kind": kind, **params},
        content=text.encode(),
        headers={"Content-Type": "text/plain"},
    )


def _stored(c: TestClient, cluster_id: int) -> list[dict[str, Any]]:
    tests: list[dict[str, Any]] = ok(c.get(f"/v1/clusters/{cluster_id}/acceptance-tests"))
    return tests


def test_post_list_and_calibrate_from_acceptance_tests_alone(client: TestClient) -> None:
    cid = make_cluster(client, {"pools": [POOL]})["id"]
    single = ok(_post(client, cid, "nccl-tests", NCCL_SINGLE, note="node000.txt"), 201)
    assert single["pool"] == "h100" and single["subject"] == "all_reduce" and single["figures"]["ranks"] == 8
    bw = single["comparison"][0]
    assert bw["tier"] == "nvlink" and bw["unit"] == "GB/s" and bw["sourced"] == pytest.approx(360.0)
    # NVLS, which the cost model does not price, pins nothing (it pinned 1.33 for every TP collective: issue 48 §7)
    assert bw["constant"] is None and bw["factor"] is None and "NVLS" in bw["note"], bw
    gather = ok(_post(client, cid, "nccl-tests", NCCL_GATHER, note="node000-ag.txt"), 201)["comparison"][0]
    assert gather["constant"] == "intra_node" and gather["factor"] == pytest.approx(356.0 / 360, rel=2e-3)
    multi = ok(_post(client, cid, "nccl-tests", NCCL_MULTI, pool="h100"), 201)["comparison"][0]
    assert multi["constant"] == "network" and multi["factor"] == pytest.approx(351.44 / 368)
    gemm = ok(_post(client, cid, "gemm", GEMM_BF16), 201)["comparison"][0]
    assert (
        gemm["constant"] == "compute" and gemm["unit"] == "TFLOP/s" and gemm["factor"] == pytest.approx(794.5 / 791.2)
    )

    checked = ok(_post(client, cid, "gemm", GEMM_BF16, dry_run="true"), 200)
    assert checked["id"] is None and checked["sets_priors"]
    tests = _stored(client, cid)
    assert [t["kind"] for t in tests] == ["gemm", "nccl-tests", "nccl-tests", "nccl-tests"]
    assert all(t["sets_priors"] for t in tests)  # each the newest of its subject (the NVLS one has no factor)
    assert tests[-1]["note"] == "node000.txt"

    cal = ok(client.post(f"/v1/clusters/{cid}/calibrations"))["calibration"]
    assert cal["measurements"] == 0
    constants = cal["constants"]["pools"]["h100"]
    assert constants["intra_node"] == pytest.approx(356.0 / 360, rel=2e-3) and constants["network"] == pytest.approx(
        0.955
    )
    assert constants["compute"] == pytest.approx(794.5 / 791.2) and constants["memory_reserve"] == 0.10
    sources = {k["name"]: k["prior_source"] for k in cal["report"]["constants"]}
    assert sources == {
        "intra_node": "all_gather_perf, 1 node x 8 GPUs",
        "network": "all_reduce_perf, 4 nodes x 8 GPUs",
        "compute": "mamf-finder bfloat16, 794.5 TFLOPS @ 2048x2048x13312",
    }
    page = client.get(f"/clusters/{cid}")
    assert page.status_code == 200 and "Measured vs sourced" in page.text and "all_reduce_perf, 4 nodes" in page.text


def test_bad_input_is_a_422_naming_the_field_or_the_line_and_stores_nothing(client: TestClient) -> None:
    cid = make_cluster(client, TWO_POOLS)["id"]
    truncated = NCCL_SINGLE.split("  1073741824")[0]
    for params, text, needle in (
        ({"kind": "nccl"}, NCCL_SINGLE, "kind"),
        ({"kind": "nccl-tests"}, NCCL_SINGLE, "say which one"),  # two pools, none given
        ({"kind": "nccl-tests", "pool": "a100"}, NCCL_SINGLE, "no pool 'a100'"),
        ({"kind": "nccl-tests", "pool": "h100"}, truncated, f"line {len(truncated.splitlines())}:"),
        ({"kind": "gemm", "pool": "h100"}, NCCL_SINGLE, "not mamf-finder output"),
        ({"kind": "gemm", "pool": "h100"}, mamf_output([(1, 1, 1, 250.0, 251.0, 255.0)], device=A100), "wrong pool"),
        ({"kind": "gemm", "pool": "h100"}, GEMM_BF16.replace("mean:   794.5", "mean:   0.0"), "must be positive"),
        ({"kind": "nccl-tests", "pool": "h100"}, nccl_output("all_gather", 1, 8, 0.001), "largest messages is 0"),
    ):
        r = _post(client, cid, params.pop("kind"), text, **params)
        assert r.status_code == 422 and needle in r.text, (needle, r.text)
    assert _stored(client, cid) == []
    assert _post(client, 999_999, "gemm", GEMM_BF16).status_code == 404


def test_measure_cluster_from_the_command_line(
    client: TestClient, server: str, tokens: dict[str, str], tmp_path: Path
) -> None:
    """The command (in-process, typer's runner) against the served app: every file parsed before any is posted and
    checked by the service before any is stored."""
    cid = make_cluster(client, {"pools": [POOL]})["id"]
    files = {
        "all_reduce_8xH100.txt": NCCL_SINGLE,
        "multi.txt": NCCL_MULTI,
        "cut.txt": NCCL_SINGLE.split("  1073741824")[0],
        "mamf.txt": GEMM_BF16,
        "a100.txt": mamf_output([(1, 1, 1, 250.0, 251.0, 255.0)], device=A100),
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    env = {"MESHPLAN_URL": server, "MESHPLAN_TOKEN": tokens["write"], "COLUMNS": "160"}

    def meshplan(*args: str) -> Result:
        paths = [str(tmp_path / a) if a.endswith(".txt") else a for a in args]
        return CliRunner().invoke(app, ["measure-cluster", str(cid), *paths], env=env)

    for args, needle in (
        (("--nccl-tests", "multi.txt", "--nccl-tests", "cut.txt"), "cut.txt: line"),  # parsed here
        (("--nccl-tests", "multi.txt", "--gemm", "a100.txt"), "a100.txt: body.gemm: the test ran on"),  # there
        (("--gemm", "mamf.txt", "--pool", "h200"), "no pool 'h200'"),
    ):
        bad = meshplan(*args)
        assert bad.exit_code == 2 and needle in bad.stderr and "--" in bad.stderr, bad.stderr
        assert len(bad.stderr.strip().splitlines()) == 1 and isinstance(bad.exception, SystemExit)  # no traceback
    assert _stored(client, cid) == []

    good = meshplan("--nccl-tests", "all_reduce_8xH100.txt", "--nccl-tests", "multi.txt", "--gemm", "mamf.txt")
    out = good.stdout
    assert good.exit_code == 0 and "network = 0.955" in out and "compute = 1.004" in out, (out, good.stderr)
    assert sorted(t["note"] for t in _stored(client, cid)) == ["all_reduce_8xH100.txt", "mamf.txt", "multi.txt"]
