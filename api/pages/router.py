"""Server-rendered pages (no JavaScript needed): clusters, models, jobs, plan history, plans and diffs.
Reads need a token, kept in a cookie after /login (or none with the open_reads setting)."""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import parse_qs, quote, urlencode

from fastapi import APIRouter, Depends, FastAPI, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates
from sqlalchemy.orm import Session

from api.convert import (
    calibration_out,
    cluster_out,
    job_out,
    jobs_out,
    measurement_out,
    model_out,
    plan_out,
    plan_summaries_out,
    version_out,
)
from api.deps import RowId, SessionDep, SettingsDep
from api.pages.copy_blocks import copy_blocks
from api.pages.figures import (
    breakdown_bar,
    device_mesh,
    interval_band,
    memory_bars,
    pipeline_timeline,
    prediction_errors,
)
from optimizer.costmodel.result import MFU_TAG
from optimizer.errors import DomainError
from optimizer.exports.timeline import simulate
from optimizer.placement.result import Placement
from optimizer.search.explain import describe
from optimizer.spec.calibration import likely_terms
from optimizer.spec.cluster_spec import MAX_NODES_PER_CLUSTER
from optimizer.spec.inventory import InventoryDiff
from optimizer.spec.objectives import LABELS, format_objective
from service.acceptance import cluster_acceptance
from service.calibration import cluster_points, comparisons
from service.next_measurement import plan_next_measurement
from service.plans import inventory_change, placement_of, plan_change, plan_pair, planned, specs_of
from store.models import MAX_ID
from store.repositories.clusters import ClusterRepository, revision_spec
from store.repositories.jobs import JobRepository
from store.repositories.measurements import CalibrationRepository
from store.repositories.models import ModelRepository
from store.repositories.paging import PageRequest
from store.repositories.plans import PlanFilter, PlanRepository
from store.repositories.tokens import TokenRepository

router = APIRouter(include_in_schema=False)
templates = Jinja2Templates(directory=str(Path(__file__).parent / "templates"))
templates.env.filters["objective"] = lambda value, name: format_objective(name, value)
templates.env.globals["objective_label"] = lambda name: LABELS.get(name, name)
templates.env.globals["band"] = interval_band
templates.env.globals["describe"] = describe
templates.env.globals["mfu_tag"] = MFU_TAG  # the convention beside every MFU [issue 48 §6]
COOKIE = "meshplan_token"


class LoginRequired(Exception):
    def __init__(self, next_url: str) -> None:
        self.next_url = next_url


def reader(request: Request, s: SessionDep, cfg: SettingsDep) -> None:
    if cfg.open_reads:
        return
    secret = request.cookies.get(COOKIE) or request.headers.get("authorization", "").removeprefix("Bearer ").strip()
    if not secret or TokenRepository(s).authenticate(secret) is None:
        raise LoginRequired(str(request.url.path) + (f"?{request.url.query}" if request.url.query else ""))


Viewer = Annotated[None, Depends(reader)]


def page(request: Request, name: str, title: str, **ctx: Any) -> HTMLResponse:
    return templates.TemplateResponse(request, name, {"title": title, **ctx})


def install(app: FastAPI) -> None:
    @app.exception_handler(LoginRequired)
    async def _login(_: Request, exc: LoginRequired) -> Response:
        return RedirectResponse(f"/login?next={quote(exc.next_url)}", status_code=303)


@router.get("/login", response_class=HTMLResponse)
def login_form(request: Request, next: str = "/plans", error: str | None = None) -> HTMLResponse:
    return page(request, "login.html", "Sign in", next=next if next.startswith("/") else "/plans", error=error)


@router.post("/login")
async def login(request: Request, s: SessionDep) -> Response:
    form = parse_qs((await request.body()).decode(errors="replace"))
    token = (form.get("token") or [""])[0].strip()
    nxt = (form.get("next") or ["/plans"])[0]
    nxt = nxt if nxt.startswith("/") and not nxt.startswith("//") else "/plans"
    if not token or TokenRepository(s).authenticate(token) is None:
        return page(request, "login.html", "Sign in", next=nxt, error="unknown or revoked token")
    resp = RedirectResponse(nxt, status_code=303)
    # Secure behind TLS (the scheme uvicorn reports, X-Forwarded-Proto from a trusted proxy with --proxy-headers):
    # the browser then never sends the token over plain HTTP [issue 59 item 5; RFC 6265 §4.1.2.5].
    secure = request.url.scheme == "https"
    resp.set_cookie(COOKIE, token, httponly=True, samesite="strict", secure=secure, max_age=30 * 24 * 3600)
    return resp


@router.get("/", response_class=HTMLResponse)
def home() -> Response:
    return RedirectResponse("/plans", status_code=303)


def list_page(path: str, template: str, title: str, rows: Callable[[Session], list[Any]]) -> None:
    """GET `path`: the page `template` shows `rows`, named after the template (clusters.html: `clusters`)."""

    name = Path(template).stem

    def show(request: Request, s: SessionDep, _: Viewer) -> HTMLResponse:
        return page(request, template, title, **{name: rows(s)})

    router.add_api_route(path, show, methods=["GET"], response_class=HTMLResponse, name=f"{name}_page")


LISTED = PageRequest(limit=200)  # the newest clusters or models a list page shows
list_page(
    "/clusters",
    "clusters.html",
    "Clusters",
    lambda s: ClusterRepository(s).listing(LISTED.limit),  # summary columns, no inventory read
)


NODES_SHOWN = 100  # nodes the cluster page lists at a time (?nodes_from= pages on); pools are summarised whole
NodesFrom = Annotated[int, Query(ge=0, le=MAX_NODES_PER_CLUSTER, description="First node the page lists (0-based).")]


MESH_NODES = 48  # rows of the plan page's device mesh at a time (?nodes_from= pages on)


def pages_of(first: int, shown: int, total: int) -> dict[str, int | None]:
    """Where a page of `shown` rows from `first` sits among `total`: its bounds and the previous and next pages."""
    return {
        "total": total,
        "shown": shown,
        "first": first,
        "last": max(first, min(total, first + shown)),
        "before": max(0, first - shown) if first > 0 else None,
        "after": first + shown if first + shown < total else None,
    }


@router.get("/clusters/{cluster_id}", response_class=HTMLResponse)
def cluster_page(
    request: Request, cluster_id: RowId, s: SessionDep, _: Viewer, nodes_from: NodesFrom = 0
) -> HTMLResponse:
    """The cluster: per-pool summary, one page of its nodes, calibration, acceptance tests, revisions; the work
    does not grow with the node count beyond parsing the (capped) inventory [issue 37 §3]."""
    repo = ClusterRepository(s)
    cluster = repo.get(cluster_id)
    c = cluster_out(s, cluster)
    head = repo.head(cluster)
    assert head is not None
    spec = revision_spec(cluster, head)
    by_type: Counter[str] = Counter()
    for p in spec.pools:
        by_type[p.gpu] += p.healthy_gpus
    nodes = spec.nodes_page(nodes_from, NODES_SHOWN)
    node_pages = pages_of(nodes_from, NODES_SHOWN, spec.node_count)
    revs = repo.revisions(cluster, PageRequest(limit=100)).items
    revisions = [{**r.__dict__, "diff": InventoryDiff.model_validate(r.diff) if r.diff else None} for r in revs]
    calibrations = [calibration_out(r) for r in CalibrationRepository(s).history(cluster_id)]
    points = cluster_points(s, cluster_id)
    acceptance = cluster_acceptance(s, cluster_id)
    return page(
        request,
        "cluster.html",
        f"Cluster {c.name}",
        c=c,
        by_type=dict(by_type),
        nodes=nodes,
        unhealthy=spec.unhealthy_nodes(NODES_SHOWN),
        node_pages=node_pages,
        revisions=revisions,
        calibrations=calibrations,
        current=calibrations[-1] if calibrations else None,
        errors_svg=prediction_errors(points) if points else None,
        measured=len(points),
        acceptance=acceptance.table(),
        acceptance_errors=[e for e in acceptance.errors if e],
    )


list_page(
    "/models", "models.html", "Models", lambda s: [model_out(s, m) for m in ModelRepository(s).page(LISTED).items]
)


@router.get("/models/{model_id}", response_class=HTMLResponse)
def model_page(request: Request, model_id: RowId, s: SessionDep, _: Viewer) -> HTMLResponse:
    repo = ModelRepository(s)
    model = repo.get(model_id)
    m = model_out(s, model)
    keys = (
        "num_layers",
        "hidden_size",
        "num_attention_heads",
        "num_kv_heads",
        "ffn_hidden_size",
        "vocab_size",
        "activation",
        "moe",
        "mla",
    )
    summary = [(k, m.spec.get(k)) for k in keys if m.spec.get(k) is not None]
    versions = [version_out(v) for v in repo.versions(model, PageRequest(limit=100)).items]
    return page(request, "model.html", f"Model {m.name}", m=m, summary=summary, versions=versions)


list_page("/jobs", "jobs.html", "Jobs", lambda s: jobs_out(s, JobRepository(s).page(PageRequest(limit=100)).items))


@router.get("/jobs/{job_id}", response_class=HTMLResponse)
def job_page(request: Request, job_id: RowId, s: SessionDep, _: Viewer) -> HTMLResponse:
    j = job_out(s, JobRepository(s).get(job_id))
    w = j.workload.model_dump()
    workload = ", ".join(f"{k}={shown(v)}" for k, v in w.items() if v is not None)
    refresh = 2 if j.status in ("queued", "running") else None
    # The job's own time, start to finish (or to now): the search's elapsed is only its part [issue 48 §5].
    wall_s = None
    if j.started_at is not None:
        end = j.finished_at or datetime.now(j.started_at.tzinfo)
        wall_s = max(0.0, (end - j.started_at).total_seconds())
    return page(request, "job.html", f"Job {j.id}", j=j, workload=workload, refresh=refresh, wall_s=wall_s)


def shown(value: object) -> str:
    """A value as a page shows it: yes / no, lists joined, never Python's True, None or brackets [issue 48 §10]."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list | tuple):
        return ", ".join(shown(v) for v in value) or "none"
    if value is None:
        return "–"
    return str(value)


IdFilter = Annotated[int | None, Query(ge=1, le=MAX_ID)]


def plan_inputs(cluster_id: IdFilter = None, model_id: IdFilter = None, watch_id: IdFilter = None) -> PlanFilter:
    """The plan history page's filters: ?cluster_id, ?model_id, ?watch_id."""
    return PlanFilter(cluster_id=cluster_id, model_id=model_id, watch_id=watch_id)


@router.get("/plans", response_class=HTMLResponse)
def plans_page(
    request: Request,
    s: SessionDep,
    _: Viewer,
    f: Annotated[PlanFilter, Depends(plan_inputs)],
    offset: Annotated[int, Query(ge=0, le=MAX_ID)] = 0,
) -> HTMLResponse:
    limit = 50
    p = PlanRepository(s).history(f, PageRequest(offset=offset, limit=limit))
    ids = (("cluster", f.cluster_id), ("model", f.model_id), ("watch", f.watch_id))
    scope = " ".join(f"{k} {v}" for k, v in ids if v)
    base = {f"{k}_id": v for k, v in ids if v}
    prev_url = f"/plans?{urlencode({**base, 'offset': max(0, offset - limit)})}" if offset else None
    next_url = f"/plans?{urlencode({**base, 'offset': offset + limit})}" if offset + limit < p.total else None
    return page(
        request,
        "plans.html",
        "Plan history",
        plans=plan_summaries_out(s, p.items),
        scope=scope,
        total=p.total,
        prev_url=prev_url,
        next_url=next_url,
    )


CONFIG_ROWS = [
    ("tensor parallel", "tp"),
    ("pipeline parallel", "pp"),
    ("data parallel", "dp"),
    ("context parallel", "cp"),
    ("context-parallel communication", "cp_comm"),
    ("expert parallel", "ep"),
    ("virtual stages", "vp"),
    ("micro-batch size", "mbs"),
    ("schedule", "schedule"),
    ("sequence parallel", "sequence_parallel"),
    ("ZeRO stage", "zero_stage"),
    ("ZeRO shard group, dp replicas (None: all dp)", "shard_group"),
    ("shard group holds", "shard_scope"),
    ("recompute", "recompute"),
    ("layers with activations offloaded to host", "offload_layers"),
    ("layers per stage", "layers_per_stage"),
    ("pools per stage", "stage_pools"),
]


def placement_rows(p: Placement, limit: int = 256) -> list[dict[str, Any]]:
    """The placement section's rows: one per host in node-rank order (the first `limit`)."""
    split = {g for g, d in enumerate(p.tp_domains) if " + " in d}
    rows = []
    for k, h in enumerate(p.hosts[:limit]):
        first, last = h.first_rank // p.tp, (h.first_rank + h.ranks - 1) // p.tp
        groups = range(first, last + 1)
        rows.append(
            {
                "node_rank": k,
                "host": h,
                "ranks": f"{h.first_rank}-{h.first_rank + h.ranks - 1}",
                "tp_groups": str(first) if first == last else f"{first}-{last}",
                "split": sorted(g for g in groups if g in split),
            }
        )
    return rows


@router.get("/plans/{plan_id}", response_class=HTMLResponse)
def plan_page(request: Request, plan_id: RowId, s: SessionDep, _: Viewer, nodes_from: NodesFrom = 0) -> HTMLResponse:
    """The plan; its device mesh draws MESH_NODES rows from `nodes_from` (a huge cluster's mesh is paged, never
    walked whole) [issue 37 item 4]."""
    row = PlanRepository(s).get(plan_id)
    p = plan_out(s, row)
    best = p.result.plan
    cluster, model = ClusterRepository(s).find(p.cluster_id), ModelRepository(s).find(p.model_id)
    names = {  # names instead of ids [issue 48 §10]
        "cluster_name": cluster.name if cluster is not None else str(p.cluster_id),
        "model_name": model.name if model is not None else str(p.model_id),
    }
    ctx: dict[str, Any] = {"p": p, "result": p.result, "best": best, **names}
    if best is not None:
        cfg, est = best.config, best.estimate
        specs = specs_of(s, row)
        timeline = simulate(
            cfg.schedule,
            [st.forward_s for st in est.stages],
            [st.backward_s for st in est.stages],
            est.microbatches,
            cfg.vp,
        )
        breakdown = [(k, v) for k, v in est.breakdown.model_dump().items() if v > 0]
        placement = placement_of(row, specs)
        exports, unavailable = copy_blocks(s, row, with_jobs=placement is not None)
        if placement is not None:
            split = sum(1 for d in placement.tp_domains if " + " in d)
            ctx.update(placement=placement, placement_rows=placement_rows(placement), split_tp_groups=split)
        ctx.update(
            config_rows=[(label, shown(getattr(cfg, k))) for label, k in CONFIG_ROWS],
            mesh=device_mesh(specs.cluster, cfg, est, MESH_NODES, placement, nodes_from),
            mesh_pages=pages_of(nodes_from, MESH_NODES, specs.cluster.node_count),  # a placed host is a node
            unavailable_exports=unavailable,
            timeline=pipeline_timeline(timeline, bubble=(est.breakdown.bubble, est.step_time_s)),
            memory=memory_bars(est),
            breakdown=breakdown,
            breakdown_svg=breakdown_bar(dict(breakdown)),
            alternatives=[
                {"alt": a, "text": describe(a.config, a.estimate.mode == "inference")} for a in p.result.alternatives
            ],
            exports=exports,
        )
    ctx["measurements"] = [measurement_out(c) for c in comparisons(s, row)]
    if best is not None and any(m.flagged for m in ctx["measurements"]):
        ctx["suspects"] = likely_terms(best.estimate.breakdown.model_dump())
    if best is not None and best.estimate.mode == "training" and not p.result.fleet:
        # a target the cost model no longer prices (e.g. a changed catalogue) has nothing to suggest
        with contextlib.suppress(DomainError):
            ctx["next_measurement"] = plan_next_measurement(s, plan_id, top=3)
    return page(request, "plan.html", f"Plan {p.id}", **ctx)


@router.get("/plans/{plan_id}/diff", response_class=HTMLResponse)
def diff_page(
    request: Request,
    plan_id: RowId,
    s: SessionDep,
    _: Viewer,
    against: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
) -> HTMLResponse:
    before_row, after_row = plan_pair(s, plan_id, against)
    before, after = planned(before_row), planned(after_row)
    d = plan_change(before_row, after_row)
    rows: list[tuple[str, Any, Any, bool]] = []
    if d.capacity_rate_after is not None:  # two SLA fleets: their replica groups, GPUs and capacity
        for change in d.fleet_changes:
            group, counts = change.split(": ")
            was, now = counts.split("→")
            rows.append((group, was, now, True))
        rows.append(("GPUs", d.gpus_before, d.gpus_after, d.gpus_before != d.gpus_after))
        cb, ca = round(d.capacity_rate_before or 0.0, 3), round(d.capacity_rate_after, 3)
        rows.append(("requests/s within the targets", cb, ca, cb != ca))
    elif before and after:
        b, a = before.config.model_dump(), after.config.model_dump()
        for label, k in CONFIG_ROWS:
            rows.append((label, b[k], a[k], b[k] != a[k]))
        for label, fb, fa in (
            ("step time, s", before.estimate.step_time_s, after.estimate.step_time_s),
            ("GPUs", before.estimate.gpus, after.estimate.gpus),
            (f"MFU ({MFU_TAG})", f"{100 * before.estimate.mfu:.1f}%", f"{100 * after.estimate.mfu:.1f}%"),
            ("peak memory, GB", round(before.estimate.peak_memory_gb, 1), round(after.estimate.peak_memory_gb, 1)),
        ):
            rows.append(
                (
                    label,
                    round(fb, 4) if isinstance(fb, float) else fb,
                    round(fa, 4) if isinstance(fa, float) else fa,
                    fb != fa,
                )
            )
    return page(
        request,
        "diff.html",
        f"Plan {plan_id} diff",
        before=before_row,
        after=after_row,
        rows=rows,
        summary=d.summary(),
        inventory=inventory_change(s, before_row, after_row),
    )
