"""`meshplan import-slurm` on GRES types that name a GPU family only (`gpu:a100`, `gpu:h100`): the variant assumed
is said on stderr and in the YAML, a mapping (`--gpu a100=A100-SXM-40GB`) decides it, and a node's features or
GRES naming a memory size pick it [issue 47 item 1]."""

from __future__ import annotations

import json

import yaml
from typer.testing import CliRunner

from api.cli import app

RUNNER = CliRunner()


def _node(name: str, gres: str, features: str = "") -> dict[str, object]:
    return {"name": name, "state": "idle", "state_flags": [], "gres": gres, "features": features, "reason": ""}


SINFO = json.dumps(
    {
        "nodes": [
            _node("a01", "gpu:a100:8"),
            _node("a02", "gpu:a100:8"),
            _node("b01", "gpu:a100:8", "ib,a100_40gb"),  # the site's features say which A100
            _node("h01", "gpu:h100:8"),
            _node("n01", "gpu:nvidia_a100-sxm4-40gb:8"),  # AutoDetect=nvml names the part: nothing assumed
        ]
    }
)


def _pools(stdout: str) -> dict[str, tuple[str, list[str]]]:
    doc = yaml.safe_load(stdout)
    return {p["name"]: (p["gpu"], [n["name"] for n in p["nodes"]]) for p in doc["pools"]}


def test_a_family_gres_type_is_said_to_be_assumed_on_stderr_and_in_the_yaml() -> None:
    r = RUNNER.invoke(app, ["import-slurm", "-"], input=SINFO)
    assert r.exit_code == 0, r.output
    assert "GPU type 'a100' names no variant: assumed A100-SXM-80GB" in r.stderr
    assert "GPU type 'h100' names no variant: assumed H100-SXM-80GB" in r.stderr
    comments = [ln for ln in r.stdout.splitlines() if ln.startswith("#")]
    assert any("'a100' on 2 node(s) names no variant: assumed A100-SXM-80GB" in c for c in comments)
    assert any("'a100' on 1 node(s): read as A100-SXM-40GB (memory from 'a100_40gb')" in c for c in comments)
    pools = _pools(r.stdout)
    assert pools["a100-sxm-80gb"] == ("A100-SXM-80GB", ["a01", "a02"])
    assert pools["a100-sxm-40gb"] == ("A100-SXM-40GB", ["b01", "n01"])


def test_a_mapping_decides_what_a_family_gres_type_means() -> None:
    r = RUNNER.invoke(app, ["import-slurm", "-", "--gpu", "a100=A100-SXM-40GB"], input=SINFO)
    assert r.exit_code == 0, r.output
    assert "'a100'" not in r.stderr and "'h100' names no variant" in r.stderr
    pools = _pools(r.stdout)
    assert pools["a100-sxm-40gb"] == ("A100-SXM-40GB", ["a01", "a02", "b01", "n01"])
    assert "a100-sxm-80gb" not in pools


def test_a_bad_mapping_names_the_option_and_the_rule() -> None:
    for bad, message in (("a100", "expected NAME=GPU"), ("a100=B9000", "B9000")):
        r = RUNNER.invoke(app, ["import-slurm", "-", "--gpu", bad], input=SINFO)
        assert r.exit_code == 2 and r.output.startswith("error: --gpu:") and message in r.output, r.output
