"""The planner's picks on well-known public scenarios against what experts ran (issue 12): for each scenario the
pick, its predicted step time and MFU, the published configuration's predicted time, its measured time where the
data has it, the ratio of the pick's predicted time to the published configuration's predicted time and to its measured
time. A pick predicted more than 15% faster than a tuned published configuration is a finding to explain.

The pick's claim (issue 44 §3): its predicted gain over the published configuration with the 80% band of that
difference (uncertainty.difference_interval: the error of a predicted ratio of two configurations of one setup), its
gain over the measured step time with the band of its own step-time interval, and a flag where its MFU lies above the
best published MFU of its GPU family and precision (optimizer/costmodel/published_mfu.py; Estimate.beyond_measured).

The picks of issue 53 §3 (PICK_CASES): each case's pick, its wall time, its worst stage's peak, 80% upper memory bound
and capacity, whether it fits with margin, what decided it, and its claim over the best-priced published recipe
(optimizer/search/recipes.py) with the band; `--cases` prints only that table.

Run: .venv/bin/python benchmarks/plan_quality.py [--framework megatron|deepspeed|torchtitan|auto] [--cases]
"""

from __future__ import annotations

import argparse
import time

from rich.console import Console
from rich.table import Table

from accuracy.plan_quality import SCENARIOS, SERVING_SCENARIOS, Scenario, best_published_mfu, published_step_time
from optimizer.costmodel.estimate import estimate
from optimizer.costmodel.uncertainty import difference_interval
from optimizer.errors import DomainError
from optimizer.search.candidates import TrainingSpace
from optimizer.search.decision import memory_figures
from optimizer.search.explain import describe
from optimizer.search.planner import plan
from optimizer.search.recipes import claim_band
from optimizer.search.recipes import price as price_recipes
from optimizer.search.space import SearchSpace, parse_pins
from optimizer.spec.cluster_loading import resolve_cluster
from optimizer.spec.cluster_spec import ClusterSpec
from optimizer.spec.model_loading import resolve_model
from optimizer.spec.model_spec import ModelSpec
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.pipeline_layout import layout_chunks
from optimizer.spec.workload import InferenceWorkload, TrainingWorkload


def _published(s: Scenario, w: TrainingWorkload) -> tuple[str, float | None]:
    """The published configuration's best predicted step time over the knobs its source leaves open."""
    if s.published is None:
        return "not published", None
    model, cluster = s.model_spec(), resolve_cluster(s.cluster)
    p = dict(s.published)
    best: float | None = None
    for vp in [int(p["vp"])] if "vp" in p else [1, 2, 3, 4, 5, 6, 8]:
        for rc in [str(p["recompute"])] if "recompute" in p else ["none", "selective", "full"]:
            for sp in (True, False):
                cfg_fields: dict[str, object] = {
                    k: v for k, v in p.items() if k not in ("vp", "recompute", "recompute_modules", "layers_per_stage")
                }
                if "recompute_modules" in p:
                    cfg_fields["recompute_modules"] = tuple(str(p["recompute_modules"]).split(","))
                per_stage = _published_layers(p, model.num_layers, vp)
                try:
                    cfg = ParallelConfig.model_validate(
                        {
                            **cfg_fields,
                            "vp": vp,
                            "schedule": "interleaved-1f1b" if vp > 1 else "1f1b",
                            "recompute": rc,
                            "sequence_parallel": sp and int(p.get("tp", 1)) > 1,
                            "tp_comm_overlap": sp and int(p.get("tp", 1)) > 1,
                            "zero_stage": 1,
                            "layers_per_stage": per_stage,
                        }
                    )
                    e = estimate(model, cluster, w, cfg)
                except (DomainError, ValueError):
                    continue
                if e.feasible and (best is None or e.step_time_s < best):
                    best = e.step_time_s
    text = " ".join(f"{k}{v}" for k, v in s.published.items())
    return text, best


def _published_layers(p: dict[str, int | str | bool], layers: int, vp: int) -> list[int] | None:
    """Layers per stage of a published configuration: its layout's, its own list, or as even as vp allows."""
    if p.get("pipeline_layout"):
        return [sum(chunks) for chunks in layout_chunks(str(p["pipeline_layout"]), int(p["pp"]))]
    if "layers_per_stage" in p:
        return [int(x) for x in str(p["layers_per_stage"]).split(",")]
    return _even(layers, int(p.get("pp", 1)), vp)


def _even(layers: int, pp: int, vp: int) -> list[int] | None:
    """Layers per stage, each a multiple of vp, as even as possible (None when it cannot be done)."""
    chunks, extra = divmod(layers // vp, pp)
    if layers % vp:
        return None
    return [(chunks + (1 if i < extra else 0)) * vp for i in range(pp)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--framework", default="megatron")
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--cases", action="store_true", help="only the issue 53 §3 cases")
    args = ap.parse_args()
    console = Console(width=220)
    console.print(cases_table(args.time_limit))
    if args.cases:
        return
    t = Table(title=f"Planner picks vs published configurations (framework {args.framework})")
    for col in (
        "scenario",
        "pick",
        "pred s",
        "MFU",
        "best pub. MFU",
        "published config",
        "pred s",
        "measured s",
        "pick / published",
        "pick / measured",
        "claimed gain vs published (80% band)",
        "claimed gain vs measured (80% band)",
        "beyond measured",
    ):
        t.add_column(col)
    findings = []
    for s in SCENARIOS:
        model, cluster = s.model_spec(), resolve_cluster(s.cluster)
        w = s.workload(args.framework)
        try:
            r = plan(model, cluster, w, time_limit_s=args.time_limit, top_k=1)
        except DomainError as exc:  # e.g. a model feature the framework does not train
            t.add_row(s.name, f"{exc.field}: {exc.rule}", *["-"] * 11)
            continue
        if r.plan is None:
            t.add_row(s.name, r.status, *["-"] * 11)
            continue
        e = r.plan.estimate
        best, rec = best_published_mfu(s.family, s.precision)
        pub_text, pub_time = _published(s, s.workload())
        meas = published_step_time(s.published_record) if s.published_record else None
        ratio = e.step_time_s / pub_time if pub_time else None
        if ratio is not None and ratio < 1 / 1.15:
            findings.append(f"{s.name}: pick predicted {1 / ratio - 1:.0%} faster than the published configuration")
        t.add_row(
            s.name,
            f"{describe(r.plan.config)} [{r.framework}]",
            f"{e.step_time_s:.2f}",
            f"{e.mfu:.1%}",
            f"{best:.1%} ({rec})",
            pub_text,
            f"{pub_time:.2f}" if pub_time else "-",
            f"{meas:.2f}" if meas else "-",
            f"{ratio:.2f}" if ratio else "-",
            f"{e.step_time_s / meas:.2f}" if meas else "-",
            claim_vs_published(ratio),
            claim_vs_measured(meas, e.step_time_interval_s, e.step_time_s),
            "yes" if e.beyond_measured else "-",
        )
        if e.beyond_measured:
            findings.append(f"{s.name}: {e.beyond_measured}")
    console.print(t)
    for f in findings:
        console.print(f"finding: {f}")
    console.print(serving_table(args.time_limit))


L31 = 8192  # Llama 3.1 405B's pre-training sequence (Dubey et al. 2024, Sec. 3.4.1; the Bridge recipes' seq_length)
# The cases of issue 53 §3: (name, model, cluster, pins, workload fields).
PICK_CASES: tuple[tuple[str, str, str, tuple[str, ...], dict[str, object]], ...] = (
    (
        "DeepSeek-V3 FP8, 1,024 H100",
        "deepseek-v3",
        "dgx-h100:128",
        (),
        {"global_batch_size": 8192, "seq_len": 4096, "precision": "fp8"},
    ),
    (
        "DeepSeek-V3 FP8, 1,024 H100, tp 8 pp 16 pinned",
        "deepseek-v3",
        "dgx-h100:128",
        ("tp=8", "pp=16"),
        {"global_batch_size": 8192, "seq_len": 4096, "precision": "fp8"},
    ),
    (
        "Llama 3 8B torchtitan, 4 DGX H100",
        "llama-3-8b",
        "dgx-h100:4",
        ("zero=1", "pp=2"),
        {"global_batch_size": 64, "seq_len": 4096, "framework": "torchtitan"},
    ),
    (
        "Llama 3.1 405B, 16,384 H100",
        "llama-3.1-405b",
        "dgx-h100:2048",
        (),
        {"global_batch_size": 2048, "seq_len": 8192},
    ),
    (
        "Llama 3.1 405B FP8 (Bridge workload), 1,024 H100",
        "llama-3.1-405b",
        "dgx-h100:128",
        (),
        {
            "global_batch_size": 1536,
            "seq_len": 8192,
            "precision": "fp8",
            "grad_dtype": "bf16",
            "fp8_param_gather": True,
        },
    ),
)


def cases_table(time_limit: float) -> Table:
    """The issue's cases: pick, wall time, memory figures, what decided, the claim over the best-priced recipe."""
    t = Table(title="Issue 53 §3: picks, their memory margin and their claim over the published recipe")
    for col in ("case", "pick", "wall s", "step s", "peak / 80% upper / capacity GB", "margin", "decided by", "recipe"):
        t.add_column(col)
    for name, model_name, cluster_name, pins, fields in PICK_CASES:
        model, cluster = resolve_model(model_name), resolve_cluster(cluster_name)
        w = TrainingWorkload.model_validate(fields)
        space = SearchSpace(pins=parse_pins(list(pins)))
        t0 = time.perf_counter()
        r = plan(model, cluster, w, space, time_limit_s=time_limit, top_k=3)
        wall = time.perf_counter() - t0
        if r.plan is None:
            t.add_row(name, r.status, f"{wall:.1f}", *["-"] * 5)
            continue
        e, m = r.plan.estimate, memory_figures(r.plan.estimate)
        summary = r.explanation.summary
        decided = next(
            (why for key, why in _DECIDERS if key in summary),
            "point estimate",
        )
        t.add_row(
            name,
            describe(r.plan.config),
            f"{wall:.1f}",
            f"{e.step_time_s:.2f}",
            f"{m.peak_gb:.1f} / {m.upper_gb:.1f} / {m.capacity_gb:.1f}",
            "at risk" if m.at_risk else "fits",
            decided,
            _recipe_claim(model, cluster, w, space, e.step_time_s),
        )
    return t


# What the explanation says decided the pick (optimizer/search/decision.py, recipes.py), first match.
_DECIDERS = (
    ("Picked the published recipe", "the recipe (fastest)"),
    ("nearer measured territory", "territory"),
    ("more memory headroom", "headroom (all at risk)"),
    ("fewer knobs away", "defaults"),
    ("Passed over", "OOM risk of faster plans"),
)


def _recipe_claim(model: ModelSpec, cluster: ClusterSpec, w: TrainingWorkload, space: SearchSpace, step: float) -> str:
    ts = TrainingSpace(model, cluster, w, space)
    priced, refused = price_recipes(model, cluster, w, space, ts.pools, ts.budget)
    if not priced:
        return f"{refused[0].recipe.id}: {refused[0].reason}" if refused else "none published"
    best = min(priced, key=lambda p: p.estimate.step_time_s)
    gain, lo, hi = claim_band(step, best.estimate.step_time_s)
    return f"{best.recipe.id} {best.estimate.step_time_s:.2f} s: {gain:+.0%} ({lo:+.0%}..{hi:+.0%})"


def claim_vs_published(ratio: float | None) -> str:
    """The pick's predicted gain over the published configuration (t_published / t_pick - 1) with the 80% band of
    the difference; "indistinguishable" when the band holds 0."""
    if ratio is None:
        return "-"
    low, high = difference_interval(ratio)  # the true ratio pick / published
    band = (1 / high - 1, 1 / low - 1)
    tag = " indistinguishable" if band[0] <= 0 <= band[1] else ""
    return f"{1 / ratio - 1:+.0%} ({band[0]:+.0%}..{band[1]:+.0%}){tag}"


def claim_vs_measured(measured: float | None, interval: tuple[float, float] | None, predicted: float) -> str:
    """The pick's predicted gain over the published run's measured step time (t_measured / t_pick - 1), with the
    band its own 80% step-time interval gives."""
    if measured is None or interval is None:
        return "-"
    return f"{measured / predicted - 1:+.0%} ({measured / interval[1] - 1:+.0%}..{measured / interval[0] - 1:+.0%})"


def serving_table(time_limit: float) -> Table:
    """SLA fleets (objective max_rate on the scenario's GPUs) next to the published deployments."""
    t = Table(title="Serving: SLA fleet picks vs published deployments")
    for col in ("scenario", "pick", "published", "pick figures", "published figures"):
        t.add_column(col)
    for s in SERVING_SCENARIOS:
        model, cluster = resolve_model(s.model), resolve_cluster(s.cluster)
        w = InferenceWorkload.model_validate({**s.workload, "objective": "max_rate"})
        r = plan(model, cluster, w, time_limit_s=time_limit)
        if r.fleet is None:
            t.add_row(s.name, r.status, s.published, "-", "-")
            continue
        gpn = cluster.pools[0].gpus_per_node
        figs = [f"{r.fleet.output_tokens_per_s_per_gpu:.0f} out tok/s/GPU"]
        if r.fleet.mode == "disaggregated":
            for role, tokens in (("decode", w.output_len), ("prefill", w.prompt_len)):
                gpus = sum(g.count * g.shape.gpus for g in r.fleet.groups if g.shape.role == role)
                figs.append(f"{r.fleet.served_rate * tokens / (gpus / gpn):.0f} tok/s per {role} node")
        pub = ", ".join(f"{v:.0f} ({k})" for k, v in s.published_rate.items())
        t.add_row(s.name, r.explanation.summary.split(". Serves")[0], s.published, "; ".join(figs), pub)
    return t


if __name__ == "__main__":
    main()
