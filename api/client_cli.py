"""`meshplan measure | report-run | calibrate | measure-cluster | next-measurement`: record what a run measured
against a plan (or a configuration that ran, which the planner may refuse, as a reported plan), a cluster's
acceptance tests (nccl-tests, mamf-finder), fit the cluster's calibration, and ask which measurement would narrow a
plan's prediction most, through a running service (MESHPLAN_URL, MESHPLAN_TOKEN) [issues 14, 33]."""

from __future__ import annotations

import dataclasses
import json
import time
import urllib.error
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from api.cli_option_groups import OptionGroup, with_option_groups
from api.cli_options import FrameworkOpt, Numerics, ParallelOptions, PlacementOptions, WorkloadShape
from api.cli_output import fail
from optimizer.errors import DomainError

# Start-up (issue 49): the parsers, specs and urllib.request load inside the commands that use them.
if TYPE_CHECKING:
    from optimizer.calibration.nccl_tests import Collective

UrlOpt = Annotated[
    str,
    typer.Option(envvar="MESHPLAN_URL", help="The service (env MESHPLAN_URL)."),
]
TokenOpt = Annotated[
    str | None,
    typer.Option(envvar="MESHPLAN_TOKEN", help="A write-scope API token (env MESHPLAN_TOKEN)."),
]
ClusterOpt = Annotated[
    int | None,
    typer.Option("--cluster", help="The cluster the run ran on (service id): checked against the plan's.", min=1),
]
DEFAULT_URL = "http://127.0.0.1:8000"
TIMEOUT_S = 60.0
POLL_S = 0.2


def register(app: typer.Typer) -> None:
    app.command("measure")(measure)
    app.command("report-run")(report_run)
    app.command("calibrate")(calibrate)
    app.command("measure-cluster")(measure_cluster)
    app.command("watch")(watch)
    app.command("next-measurement")(next_measurement)


def _call(
    url: str,
    token: str | None,
    path: str,
    body: bytes | None,
    content_type: str,
    method: str = "POST",
    not_found: str = "plan_id",
) -> Any:
    """POST (or GET) to the service; an error answer becomes a DomainError with the service's own message."""
    if not token:
        scope = "an API token" if method == "GET" else "a write-scope API token"
        raise DomainError("--token", f"{scope} is needed (--token or MESHPLAN_TOKEN)")
    if not url.startswith(("http://", "https://")):
        raise DomainError("--url", f"must start with http:// or https:// (got {url!r})")
    import urllib.request

    data = None if method == "GET" else body or b""
    req = urllib.request.Request(url.rstrip("/") + path, data=data, method=method)
    req.add_header("Authorization", f"Bearer {token}")
    if data is not None:
        req.add_header("Content-Type", content_type)
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT_S) as resp:
            return json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as exc:
        raise DomainError(not_found if exc.code == 404 else f"HTTP {exc.code}", _message(exc)) from None
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise DomainError("--url", f"cannot reach {url}: {reason}") from None


def _detail(exc: urllib.error.HTTPError) -> Any:
    try:
        return json.loads(exc.read() or b"{}").get("detail")
    except (ValueError, AttributeError):
        return None


def _message(exc: urllib.error.HTTPError) -> str:
    detail = _detail(exc)
    if isinstance(detail, list) and detail:  # 422: [{loc, msg}]
        return "; ".join(f"{'.'.join(str(p) for p in d.get('loc', []))}: {d.get('msg')}" for d in detail)
    return str(detail or exc.reason)


def measure(
    plan_id: Annotated[int, typer.Argument(help="The plan the run followed.", min=1, max=2_147_483_647)],
    step_time: Annotated[float | None, typer.Option("--step-time", help="Seconds per step.")] = None,
    tokens_per_s: Annotated[float | None, typer.Option("--tokens-per-s", help="Tokens per second, whole job.")] = None,
    peak_allocated_gb: Annotated[float | None, typer.Option(help="torch.cuda.max_memory_allocated, GB.")] = None,
    peak_reserved_gb: Annotated[float | None, typer.Option(help="torch.cuda.max_memory_reserved, GB.")] = None,
    framework_version: Annotated[str, typer.Option(help="e.g. core_r0.13.0.")] = "",
    steps: Annotated[int | None, typer.Option(help="Steps the figures are a median of.", min=1)] = None,
    note: Annotated[str, typer.Option(help="Free text.")] = "",
    log: Annotated[Path | None, typer.Option(help="A run's log instead of figures (parsed by the service).")] = None,
    log_format: Annotated[
        str, typer.Option("--format", help="auto, megatron, torchtitan, deepspeed, nemo, vllm, sglang.")
    ] = "auto",
    warmup: Annotated[int, typer.Option(help="Log steps skipped at the start.", min=0, max=100_000)] = 3,
    trace: Annotated[
        Path | None,
        typer.Option(
            help="A PyTorch profiler trace instead: a *.json / *.json.gz file or a directory of one per rank (its "
            "step time, phases and breakdown are stored)."
        ),
    ] = None,
    cluster: ClusterOpt = None,
    url: UrlOpt = DEFAULT_URL,
    token: TokenOpt = None,
) -> None:
    """Record what a run of a plan measured (figures, its log or its profiler trace) and print it next to the
    prediction."""
    from optimizer.spec.yaml_documents import read_document

    figures = Figures(step_time, tokens_per_s, peak_allocated_gb, peak_reserved_gb, steps, framework_version, note)
    try:
        if trace is not None:
            from api.cli_trace import print_phases, trace_body

            if figures.given() or log is not None:
                raise DomainError("--trace", "give a trace, a log or figures, one of them")
            query = {"note": note} | ({"cluster_id": cluster} if cluster is not None else {})
            path = f"/v1/plans/{plan_id}/measurements/trace?{urllib.parse.urlencode(query)}"
            out = _call(url, token, path, trace_body(trace), "application/octet-stream")
            _print_measurement(out, plan_id)
            print_phases(out)
            return
        if log is not None:
            if figures.given():
                raise DomainError("--log", "give a log or figures, not both")
            text = read_document(log, "--log")
            query = {"format": log_format, "warmup": warmup, "note": note}
            query |= {"cluster_id": cluster} if cluster is not None else {}
            path = f"/v1/plans/{plan_id}/measurements/log?{urllib.parse.urlencode(query)}"
            out = _call(url, token, path, text.encode(), "text/plain")
        else:
            out = _post_figures(url, token, plan_id, figures, cluster)
    except DomainError as exc:
        fail(exc)
    _print_measurement(out, plan_id)


@dataclass(frozen=True)
class Figures:
    """What a run measured, as typed in (None: not given)."""

    step_time_s: float | None = None
    tokens_per_s: float | None = None
    peak_allocated_gb: float | None = None
    peak_reserved_gb: float | None = None
    steps: int | None = None
    framework_version: str = ""
    note: str = ""

    def given(self) -> bool:
        """Whether any measured figure was given."""
        return any(
            v is not None for v in (self.step_time_s, self.tokens_per_s, self.peak_allocated_gb, self.peak_reserved_gb)
        )

    def document(self) -> dict[str, Any]:
        """The measurement's JSON body (the figures given)."""
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None and v != ""}


def _post_figures(url: str, token: str | None, plan_id: int, figures: Figures, cluster: int | None) -> Any:
    query = f"?cluster_id={cluster}" if cluster is not None else ""
    body = json.dumps(figures.document()).encode()
    return _call(url, token, f"/v1/plans/{plan_id}/measurements{query}", body, "application/json")


def _print_measurement(out: dict[str, Any], plan_id: int) -> None:
    t = Table(title=f"Measurement {out['id']} of plan {plan_id}")
    for col in ("measured s", "as planned s", "sourced constants s", "current calibration s", "error"):
        t.add_column(col, justify="right")

    def f(v: float | None) -> str:
        return f"{v:.4g}" if v is not None else "-"

    err = out.get("error")
    flag = " (> 20%)" if out.get("flagged") else ""
    t.add_row(
        f(out.get("measured_step_s")),
        f(out.get("planned_step_s")),
        f(out.get("uncalibrated_step_s")),
        f(out.get("calibrated_step_s")),
        f"{err:+.1%}{flag}" if err is not None else "-",
    )
    Console().print(t)


@with_option_groups
def report_run(
    *,
    cluster_id: Annotated[int, typer.Argument(help="The cluster it ran on (service id).", min=1, max=2_147_483_647)],
    model_id: Annotated[int, typer.Argument(help="The model it trained (service id).", min=1, max=2_147_483_647)],
    gbs: Annotated[int, typer.Option(help="Global batch, sequences.", min=1)],
    seq_len: Annotated[int, typer.Option(help="Sequence length, tokens.", min=1)],
    numerics: OptionGroup[Numerics],
    framework: FrameworkOpt = "megatron",
    parallel: OptionGroup[ParallelOptions],
    placement: OptionGroup[PlacementOptions],
    step_time: Annotated[float | None, typer.Option("--step-time", help="Seconds per step, measured.")] = None,
    tokens_per_s: Annotated[float | None, typer.Option(help="Tokens per second, whole job, measured.")] = None,
    peak_allocated_gb: Annotated[float | None, typer.Option(help="torch.cuda.max_memory_allocated, GB.")] = None,
    peak_reserved_gb: Annotated[float | None, typer.Option(help="torch.cuda.max_memory_reserved, GB.")] = None,
    note: Annotated[str, typer.Option(help="Free text.")] = "",
    url: UrlOpt = DEFAULT_URL,
    token: TokenOpt = None,
) -> None:
    """Report a training configuration that ran (which the planner may refuse): the service plans it as given,
    states any memory overrun the model predicts, and records the run's figures against that plan when given."""
    from api.cli_inputs import build_parallel_config, build_workload

    figures = Figures(step_time, tokens_per_s, peak_allocated_gb, peak_reserved_gb, note=note)
    try:
        work = build_workload(WorkloadShape(gbs=gbs, seq_len=seq_len), numerics, None, framework)
        config = build_parallel_config(parallel, placement)
        doc = {
            "cluster_id": cluster_id,
            "model_id": model_id,
            "workload": work.model_dump(mode="json"),
            "search": {"ran": config.model_dump(mode="json", exclude_defaults=True)},
        }
        job = _call(url, token, "/v1/jobs", json.dumps(doc).encode(), "application/json", not_found="cluster_id")
        job = _wait(url, token, int(job["id"]))
        if job["status"] != "succeeded" or job.get("plan_id") is None:
            raise DomainError("search.ran", f"job {job['id']} {job['status']}: {job.get('error') or 'no plan'}")
        plan_id = int(job["plan_id"])
        plan = _call(url, token, f"/v1/plans/{plan_id}", None, "application/json", method="GET")
        measured = _post_figures(url, token, plan_id, figures, cluster_id) if figures.given() else None
    except DomainError as exc:
        fail(exc)
    est = plan["result"]["plan"]["estimate"]
    Console().print(
        f"plan {plan_id} ({plan['solver_status']}): step time {est['step_time_s']:.4g} s, peak memory "
        f"{est['peak_memory_gb']:.1f} GB per GPU"
    )
    if est.get("memory_overrun_gb") is not None:
        Console().print(f"[yellow]memory overrun {est['memory_overrun_gb']:.1f} GB per GPU[/yellow]: {est['reason']}")
    if measured is not None:
        _print_measurement(measured, plan_id)


def _wait(url: str, token: str | None, job_id: int) -> dict[str, Any]:
    """The job once it has finished (polled; at most TIMEOUT_S)."""
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        job: dict[str, Any] = _call(url, token, f"/v1/jobs/{job_id}", None, "application/json", method="GET")
        if job["status"] in ("succeeded", "failed", "cancelled"):
            return job
        if time.monotonic() > deadline:
            raise DomainError("--url", f"job {job_id} did not finish within {TIMEOUT_S:g} s")
        time.sleep(POLL_S)


def calibrate(
    cluster_id: Annotated[int, typer.Argument(help="The cluster to calibrate.", min=1, max=2_147_483_647)],
    url: UrlOpt = DEFAULT_URL,
    token: TokenOpt = None,
) -> None:
    """Fit the cluster's constants to its measurements and print them with their spread and support."""
    try:
        out = _call(url, token, f"/v1/clusters/{cluster_id}/calibrations", None, "application/json")
    except DomainError as exc:
        fail(exc)
    cal = out["calibration"]
    state = "new version" if out["created"] else "unchanged"
    t = Table(title=f"Cluster {cluster_id}: calibration {cal['number']} ({state}, {cal['measurements']} measurements)")
    for col in ("pool", "constant", "value", "spread", "runs", "fitted"):
        t.add_column(col)
    for k in cal["report"]["constants"]:
        t.add_row(
            k["pool"],
            k["name"],
            f"{k['value']:.3f}",
            f"±{k['spread']:.1%}",
            str(k["runs"]),
            "yes" if k["identified"] else f"no: {k['reason']}",
        )
    Console().print(t)


def watch(
    cluster_id: Annotated[int, typer.Argument(help="The cluster to watch.", min=1, max=2_147_483_647)],
    model_id: Annotated[int, typer.Argument(help="The model to plan.", min=1, max=2_147_483_647)],
    name: Annotated[str, typer.Option(help="The watch's name (unique).")],
    gbs: Annotated[int, typer.Option(help="Global batch, sequences.", min=1)],
    seq_len: Annotated[int, typer.Option(help="Sequence length, tokens.", min=1)],
    threshold: Annotated[
        float | None,
        typer.Option(
            help="Percent (0-100) a nightly re-plan's layout must be predicted faster, beyond its 80% interval, "
            "before it replaces the running one (default 5)."
        ),
    ] = None,
    url: UrlOpt = DEFAULT_URL,
    token: TokenOpt = None,
) -> None:
    """Watch a (cluster, model, training workload): re-planned every night, keeping the running layout unless a
    new one is significantly faster."""
    try:
        if threshold is not None and not 0 <= threshold <= 100:
            raise DomainError("--threshold", f"must be between 0 and 100 percent (got {threshold:g})")
        doc = {
            "name": name,
            "cluster_id": cluster_id,
            "model_id": model_id,
            "workload": {"mode": "training", "global_batch_size": gbs, "seq_len": seq_len},
            "switch_threshold_pct": threshold,
        }
        out = _call(url, token, "/v1/watches", json.dumps(doc).encode(), "application/json")
    except DomainError as exc:
        fail(exc)
    pct = out.get("switch_threshold_pct")
    Console().print(f"watch {out['id']} ({out['name']}): switch threshold {5.0 if pct is None else pct:g}%")


def next_measurement(
    plan_id: Annotated[int, typer.Argument(help="The training plan to narrow.", min=1, max=2_147_483_647)],
    steps: Annotated[int, typer.Option(help="Steps a short run logs after warm-up.", min=1, max=10_000)] = 20,
    top: Annotated[int, typer.Option(help="Candidates to list.", min=1, max=100)] = 5,
    url: UrlOpt = DEFAULT_URL,
    token: TokenOpt = None,
) -> None:
    """Which short run or acceptance test would narrow a training plan's predicted step time the most per
    GPU-hour, with its cluster's current calibration."""
    try:
        query = urllib.parse.urlencode({"steps": steps, "top": top})
        out = _call(url, token, f"/v1/plans/{plan_id}/next-measurement?{query}", None, "", method="GET")
    except DomainError as exc:
        fail(exc)
    console = Console()
    console.print(
        f"Plan {plan_id} ({out['target']}): predicted step {out['step_time_s']:.4g} s, the constants' share of its "
        f"80% interval ±{out['interval_before_pct']:.1f}% (±{out['total_interval_pct']:.1f}% with the per-run "
        f"floor); {out['basis']}."
    )
    t = Table(title="Next measurement, best narrowing per GPU-hour first")
    for col in ("#", "measurement", "GPUs", "GPU-hours", "interval after", "narrows by"):
        t.add_column(col, justify="left" if col == "measurement" else "right")
    for i, c in enumerate(out["candidates"], 1):
        t.add_row(
            str(i),
            c["label"] if c["kind"] == "acceptance_test" else f"{c['steps']}-step run of {c['label']}",
            str(c["gpus"]),
            f"{c['gpu_hours']:.2f}",
            f"±{c['interval_after_pct']:.1f}%",
            f"{c['relative_reduction']:.0%}",
        )
    console.print(t)
    if out["candidates"]:
        console.print(out["candidates"][0]["sentence"])


def _collective_hint(path: Path, text: str) -> Collective | None:
    """The collective of an nccl-tests output whose version does not print it, from its file name
    (`all_gather_2x8.txt`); None when the output names it itself."""
    from optimizer.calibration.nccl_tests import COLLECTIVES

    if "Collective test concluded:" in text:
        return None
    return next((c for c in COLLECTIVES if c in path.name), None)


def measure_cluster(
    cluster_id: Annotated[int, typer.Argument(help="The cluster the tests ran on.", min=1, max=2_147_483_647)],
    nccl_tests: Annotated[
        list[Path] | None,
        typer.Option("--nccl-tests", help="An nccl-tests output (all_reduce_perf...; repeat for more)."),
    ] = None,
    gemm: Annotated[
        list[Path] | None, typer.Option("--gemm", help="A mamf-finder.py output file (repeat for more dtypes).")
    ] = None,
    pool: Annotated[str | None, typer.Option(help="The pool they ran on (default: the cluster's only pool).")] = None,
    url: UrlOpt = DEFAULT_URL,
    token: TokenOpt = None,
) -> None:
    """Record a pool's acceptance tests (nccl-tests, the MAMF GEMM sweep) and print their figures against the cost
    model's. Every file is parsed here and checked by the service before any is stored: one bad file stores none."""
    from optimizer.calibration.gemm_bench import parse_gemm_bench
    from optimizer.calibration.nccl_tests import parse_nccl_tests
    from optimizer.spec.yaml_documents import read_document

    files = [("nccl-tests", "--nccl-tests", p) for p in nccl_tests or []] + [("gemm", "--gemm", p) for p in gemm or []]
    try:
        if not files:
            raise DomainError("--nccl-tests", "give at least one --nccl-tests or --gemm file")
        posts: list[tuple[str, Path, str, dict[str, str]]] = []
        for kind, option, path in files:
            text = read_document(path, option)
            query = {"kind": kind, "note": path.name[:2000], **({"pool": pool} if pool else {})}
            try:
                if kind == "gemm":
                    parse_gemm_bench(text)
                else:
                    hint = _collective_hint(path, text)
                    parse_nccl_tests(text, hint)
                    query.update({"collective": hint} if hint else {})
            except DomainError as exc:
                raise DomainError(f"{option} {path}", exc.rule) from None
            posts.append((option, path, text, query))
        outs = []
        for dry_run in (True, False):  # the service checks every file against the pool, then stores them
            for option, path, text, query in posts:
                q = urllib.parse.urlencode({**query, "dry_run": str(dry_run).lower()})
                try:
                    out = _call(
                        url,
                        token,
                        f"/v1/clusters/{cluster_id}/acceptance-tests?{q}",
                        text.encode(),
                        "text/plain",
                        not_found="cluster_id",
                    )
                except DomainError as exc:
                    if exc.field in ("HTTP 422", "HTTP 413"):  # this file's fault: name it
                        rule = exc.rule if exc.field == "HTTP 422" else f"{exc.field}: {exc.rule}"
                        raise DomainError(f"{option} {path}", rule) from None
                    raise
                if not dry_run:
                    outs.append((path, out))
    except DomainError as exc:
        fail(exc)
    t = Table(title=f"Cluster {cluster_id}: acceptance tests, measured vs sourced")
    for col in ("test", "pool", "quantity", "measured", "sourced", "pins"):
        t.add_column(col, justify="right" if col in ("measured", "sourced") else "left")
    notes = []
    for path, out in outs:
        for f in out["comparison"]:
            pins = f"{f['constant']} = {f['factor']:.3f}" if f["constant"] else "-"
            t.add_row(
                path.name,
                out["pool"],
                f"{f['quantity']} ({f['tier']})",
                f"{f['measured']:.4g} {f['unit']}",
                f"{f['sourced']:.4g}",
                pins,
            )
            if f["note"] and f["quantity"] != "latency":  # the latency note is the same for every test
                notes.append(f"{path.name}: {f['note']}")
    console = Console()
    console.print(t)
    for note in dict.fromkeys(notes):
        console.print(note, markup=False, highlight=False)
    console.print(f"Stored {len(outs)} tests. `meshplan calibrate {cluster_id}` fits the calibration from them.")
