"""`meshplan export PLAN TOOL`: a stored plan's exports through a running service (MESHPLAN_URL, MESHPLAN_TOKEN),
printed as `meshplan plan --export` prints them: the API's Export answers, each as Export.script() [issue 53 §2]."""

from __future__ import annotations

import json
import sys
import urllib.parse
from typing import Annotated

import typer

from api.cli_output import fail
from api.cli_plan import print_export, write_export
from api.client_cli import DEFAULT_URL, TokenOpt, UrlOpt, _call
from optimizer.errors import DomainError

# The export names the API takes (optimizer/spec/names.py TOOLS and SCHEDULERS; `GET /v1/plans/{id}/export/{tool}`).
TOOL_HELP = "megatron, deepspeed, torchtitan, vllm, sglang, trtllm; or slurm / k8s (a training plan's job)."


def register(app: typer.Typer) -> None:
    app.command("export")(export)


def export(
    plan_id: Annotated[int, typer.Argument(help="The stored plan.", min=1, max=2_147_483_647)],
    tool: Annotated[str, typer.Argument(help=TOOL_HELP)],
    model_id: Annotated[
        str | None,
        typer.Option("--model-id", help="Serving exports: the Hugging Face id or checkpoint directory to load."),
    ] = None,
    output: Annotated[
        str | None,
        typer.Option("--output", "-o", help="Write exactly the export's bytes to this file ('-': stdout)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="The Export objects as JSON (`exports`).")] = False,
    url: UrlOpt = DEFAULT_URL,
    token: TokenOpt = None,
) -> None:
    """A stored plan's launch for a framework or engine (an SLA fleet: one per replica group, and the front end of
    a disaggregated fleet), or a training plan's Slurm script or Kubernetes JobSet, byte for byte what the API and
    the plan page give."""
    from optimizer.errors import UnknownNameError
    from optimizer.exports.launch import Export
    from optimizer.spec.names import SCHEDULERS, TOOLS

    try:
        if tool not in (*TOOLS, *SCHEDULERS):
            raise UnknownNameError("TOOL", tool, (*TOOLS, *SCHEDULERS))
        answers = _exports(url, token, plan_id, tool, model_id)
    except DomainError as exc:
        fail(exc)
    exports = [Export.model_validate(a) for a in answers]
    if output is not None:
        write_export(output, exports, tool)
        return
    if as_json:
        doc = {"plan_id": plan_id, "tool": tool, "exports": [e.model_dump(mode="json") for e in exports]}
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        return
    for e in exports:
        print_export(e)


def _exports(url: str, token: str | None, plan_id: int, tool: str, model_id: str | None) -> list[object]:
    """The API's answers: /fleet-export for an SLA fleet's serving launches, else /export (one)."""
    from optimizer.spec.names import ENGINES

    plan = _call(url, token, f"/v1/plans/{plan_id}", None, "", method="GET")
    query = "?" + urllib.parse.urlencode({"model_id": model_id}) if model_id else ""
    tool_path = urllib.parse.quote(tool, safe="")
    if (plan.get("result") or {}).get("fleet") and tool in ENGINES:
        fleet: list[object] = _call(url, token, f"/v1/plans/{plan_id}/fleet-export/{tool_path}{query}", None, "", "GET")
        return fleet
    return [_call(url, token, f"/v1/plans/{plan_id}/export/{tool_path}{query}", None, "", method="GET")]
