"""The `meshplan` command line."""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from api.cli_errors import OneLineErrorGroup
from api.cli_option_groups import OptionGroup, with_option_groups
from api.cli_options import (
    CalibrationOpt,
    ConcurrencyOpt,
    FrameworkOpt,
    JsonOpt,
    MeasuredRun,
    Numerics,
    ObjectiveOpt,
    OutputOpt,
    ParallelOptions,
    PlacementOptions,
    ReliabilityOptions,
    ServingEngine,
    ServingOptions,
    Target,
    WorkloadShape,
)
from api.cli_output import DOES_NOT_FIT, FITS, err, fail, finish, out, plan_exit_code, write_output
from api.cli_plan import check_output, plan_exports, plan_space, print_export, print_notes, write_export
from optimizer.errors import DomainError

# Start-up: `meshplan --help` and every command import only typer, rich and the option declarations here; what a
# command runs (the cost model, the search, pydantic specs, OR-Tools) is imported inside it (issue 49: --help in
# <= 0.3 s). The names below are for the type checker.
if TYPE_CHECKING:
    from optimizer.calibration.measurements import Measurement
    from optimizer.costmodel.result import Estimate, LoadLatency
    from optimizer.exports.launch import Export
    from optimizer.search.result import PlanResult
    from optimizer.spec.workload import InferenceWorkload, TrainingWorkload

app = typer.Typer(
    cls=OneLineErrorGroup,
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="meshplan: split a large transformer over a GPU cluster.",
)


@app.command()
@with_option_groups
def estimate(
    *,
    target: OptionGroup[Target],
    shape: OptionGroup[WorkloadShape],
    parallel: OptionGroup[ParallelOptions],
    numerics: OptionGroup[Numerics],
    placement: OptionGroup[PlacementOptions],
    objective: ObjectiveOpt = None,
    framework: FrameworkOpt = "megatron",
    serving_engine: OptionGroup[ServingEngine],
    serving: OptionGroup[ServingOptions],
    concurrency: ConcurrencyOpt = None,
    calibration: CalibrationOpt = None,
    run: OptionGroup[MeasuredRun],
    reliability: OptionGroup[ReliabilityOptions],
    as_json: JsonOpt = False,
) -> None:
    """Predict per-GPU memory and step time (or TTFT/TPOT, and their percentiles at --rate or --concurrency) of ONE
    parallel configuration."""
    from api.cli_inputs import apply_reliability, build_parallel_config, build_workload, resolve_target
    from optimizer.costmodel.estimate import estimate as run_estimate

    try:
        spec, clus = resolve_target(target, calibration)
        clus = apply_reliability(clus, reliability)
        work = build_workload(
            shape, numerics, objective, framework, serving=serving, engine=serving_engine, concurrency=concurrency
        )
        config = build_parallel_config(parallel, placement)
        measured = measured_figures(run, work, config.gpus)
        result = run_estimate(spec, clus, work, config, admit=run.ran or measured is not None)
    except DomainError as exc:
        fail(exc)
    history = history_against(reliability, result)
    if as_json:
        doc = estimate_json(result)
        if measured is not None:
            doc["measured"] = measured.model_dump(mode="json", exclude_none=True)
        if history is not None:
            doc["restart_history"] = history
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        render_estimate(result, spec.name, clus.name)
        if measured is not None:
            render_measured(measured, result)
        if history is not None:
            render_history(history)
    finish(FITS if result.feasible or result.admitted else DOES_NOT_FIT)


def render_history(history: dict[str, Any]) -> None:
    """The measured history beside the prediction made with it."""
    if "jobs" in history:
        band = history["interruptions_per_day_interval"]
        out.print(
            f"restart history: {history['jobs']} jobs, {history['interruptions']} interruptions, "
            f"{history['interruptions_per_day']:.3g} per day (80% {band[0]:.3g}-{band[1]:.3g}), "
            f"restart {history['restart_s'] or 0:,.0f} s, measured uptime {history['uptime']:.1%} against "
            f"predicted ETTR {history['predicted_ettr']:.1%} (uptime bounds the goodput from above)"
        )
    if "training_log" in history:
        log = history["training_log"]
        down = sum(log["downtime_s"]) / len(log["downtime_s"]) if log["downtime_s"] else 0.0
        out.print(
            f"training log: {log['restarts']} restarts, {down:,.0f} s down and "
            f"{sum(log['rework_steps']) / max(1, log['restarts']):,.0f} steps redone per restart; measured goodput "
            f"{log['measured_goodput']:.1%} against predicted {history['predicted_fraction']:.1%}"
        )


def history_against(reliability: ReliabilityOptions, result: Estimate) -> dict[str, Any] | None:
    """What --restart-history measured, beside the prediction made with it (None without a history)."""
    from api.cli_inputs import restart_history_file, training_log_file

    g = result.goodput
    if g is None or (reliability.restart_history is None and reliability.training_log is None):
        return None
    doc: dict[str, Any] = {"predicted_ettr": g.ettr, "predicted_fraction": g.fraction}
    if reliability.restart_history is not None:
        h = restart_history_file(reliability.restart_history)
        doc |= {
            "jobs": h.jobs,
            "interruptions": h.interruptions,
            "interruptions_per_day": h.per_running_day,
            "interruptions_per_day_interval": list(h.rate_band()),
            "restart_s": h.restart_s,
            "uptime": h.uptime,
        }
    if reliability.training_log is not None:
        log = training_log_file(reliability.training_log)
        doc["training_log"] = {
            "restarts": log.restarts,
            "downtime_s": list(log.downtime_s),
            "rework_steps": list(log.rework_steps),
            "step_s": log.step_s,
            "measured_goodput": log.measured_goodput,
        }
    return doc


def estimate_json(result: Estimate) -> dict[str, object]:
    """The documented JSON shape of an estimate."""
    return result.model_dump(mode="json", exclude_none=False)


def num(value: float) -> str:
    """Three significant figures without an exponent: 8,430 not 8.43e+03, 0.0123 as is [issue 48 §10]."""
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"


def _band(interval: tuple[float, float] | None, unit: str) -> str:
    """' (80%: low-high unit)', or nothing without an interval."""
    return "" if interval is None else f" (80%: {num(interval[0])}-{num(interval[1])} {unit})"


def render_estimate(e: Estimate, model: str, cluster: str) -> None:
    """Readable tables: verdict, per-stage memory, time breakdown."""
    verdict = "[green]fits[/green]" if e.feasible else f"[red]does not fit[/red]: {e.reason}"
    if e.admitted:  # reported as run: priced as given, the overrun stated
        verdict = "[green]ran (reported)[/green]" if e.feasible else f"[yellow]ran (reported)[/yellow]: {e.reason}"
    out.print(f"[bold]{model}[/bold] on [bold]{cluster}[/bold] ({e.gpus} GPUs, {e.mode}): {verdict}")
    if e.mode == "training":
        out.print(
            f"step time {num(e.step_time_s)} s{_band(e.step_time_interval_s, 's')} | {e.tokens_per_s:,.0f} tokens/s | "
            f"MFU {e.mfu:.1%} | HFU {e.hfu:.1%} | {e.microbatches} micro-batches"
        )
        if e.beyond_measured:
            out.print(f"[yellow]{e.beyond_measured}[/yellow]")
        from optimizer.costmodel.result import MFU_TRAINING

        out.print(f"[dim]{e.mfu_convention or MFU_TRAINING}[/dim]", soft_wrap=True)
    else:
        ttft, tpot = e.ttft_interval_s, e.tpot_interval_s
        out.print(
            f"TTFT {num(1000 * (e.ttft_s or 0))} ms{_band(ttft and (1000 * ttft[0], 1000 * ttft[1]), 'ms')} | "
            f"TPOT {num(1000 * (e.tpot_s or 0))} ms{_band(tpot and (1000 * tpot[0], 1000 * tpot[1]), 'ms')} | "
            f"{e.tokens_per_s:,.0f} output tokens/s"
        )
    if e.load_latency is not None:
        render_load_latency(e.load_latency)
    out.print(f"peak memory {e.peak_memory_gb:.1f} GB{_band(e.peak_memory_interval_gb, 'GB')}")
    g = e.goodput
    if g is not None:
        from optimizer.search.explain import goodput_lines

        out.print(goodput_lines(g))
    if e.memory_overrun_gb is not None:
        out.print(f"memory overrun {e.memory_overrun_gb:.1f} GB per GPU (predicted peak minus the GPU's memory)")
    if e.interval_basis:
        out.print(f"[dim]80% intervals: {e.interval_basis}[/dim]")
    if e.stack is not None and (e.stack.version is not None or e.stack.novelty):
        asked = f"{e.stack.framework} {e.stack.version or '(current defaults)'}"
        novel = "; ".join(e.stack.novelty) or "inside the fitted runs"
        out.print(f"stack: {asked}, priced as {e.stack.priced_as or 'its default constants'} | novelty: {novel}")
    for s in e.stages:
        if s.oom_risk:
            out.print(f"[yellow]stage {s.index}: out-of-memory risk (the 80% memory interval exceeds the GPU)[/yellow]")
    mem = Table(title="Per-GPU memory by stage (GB = 10^9 bytes: an 80 GiB card's capacity is 85.9 GB)")
    terms = (["weights", "gradients", "optimizer"] if e.mode == "training" else ["weights"]) + [
        "embedding_lm_head",
        "activations" if e.mode == "training" else "kv_cache",
        "transient",
        "reserve",
        "total",
        "capacity",
    ]
    for col in ("stage", "gpu", "layers", *(t.replace("embedding_lm_head", "emb/head") for t in terms)):
        mem.add_column(col, justify="right")
    for s in e.stages:
        row = s.memory_gb.model_dump()
        mem.add_row(
            str(s.index),
            s.gpu,
            str(s.layers),
            *(f"{row[t]:.1f}" for t in terms),
            style="" if s.fits else "red",
        )
    out.print(mem)
    tb = Table(title="Where the time goes (s)")
    tb.add_column("term")
    tb.add_column("seconds", justify="right")
    tb.add_column("share", justify="right")
    total = e.step_time_s
    for k, v in e.breakdown.model_dump().items():
        if v > 0:
            tb.add_row(k, f"{v:.4f}", f"{v / total:.1%}")
    out.print(tb)


def render_load_latency(ll: LoadLatency) -> None:
    """TTFT, TPOT, ITL and end-to-end percentiles at the workload's rate, concurrency or trace, per replica."""
    out.print(
        f"at {ll.load_words()} per replica ({ll.replicas} replica{'s' if ll.replicas > 1 else ''}): "
        f"{ll.request_rate:.3g} requests/s, {ll.output_tokens_per_s:,.0f} output tokens/s per replica"
        + ("" if ll.sustained else " [red](not sustained: the queue keeps growing)[/red]")
    )
    tab = Table(title="Latency at that load (ms)")
    for col in ("", "mean", "median", "p90", "p99"):
        tab.add_column(col, justify="right")
    for name, p in (("TTFT", ll.ttft), ("TPOT", ll.tpot), ("ITL", ll.itl), ("end-to-end", ll.e2e)):
        if p is not None:
            tab.add_row(name, *(num(1000 * v) for v in (p.mean_s, p.p50_s, p.p90_s, p.p99_s)))
    out.print(tab)


@app.command()
@with_option_groups
def plan(
    *,
    target: OptionGroup[Target],
    shape: OptionGroup[WorkloadShape],
    objective: ObjectiveOpt = None,
    numerics: OptionGroup[Numerics],
    framework: FrameworkOpt = "megatron",
    serving_engine: OptionGroup[ServingEngine],
    serving: OptionGroup[ServingOptions],
    pin: Annotated[
        list[str] | None,
        typer.Option(help="Fix or bound a knob: tp=8, pp<=16, recompute=full, recompute_modules=mla_up_proj+mlp."),
    ] = None,
    max_gpus: Annotated[int | None, typer.Option(help="GPU budget.")] = None,
    pools: Annotated[str | None, typer.Option(help="Allowed pools, comma-separated.")] = None,
    schedules: Annotated[str | None, typer.Option(help="Schedules to search (default 1f1b,interleaved-1f1b).")] = None,
    top: Annotated[int, typer.Option(help="Alternatives to show (top K).")] = 3,
    calibration: CalibrationOpt = None,
    time_limit: Annotated[float, typer.Option(help="Solver time limit, seconds (0.1 - 3600).")] = 60.0,
    export_to: Annotated[
        str | None,
        typer.Option(
            "--export",
            help="megatron, deepspeed, torchtitan, vllm, sglang, trtllm; or slurm (an sbatch script) or k8s (a "
            "JobSet for Kueue) on the plan's placement, launching the plan's framework.",
        ),
    ] = None,
    reliability: OptionGroup[ReliabilityOptions],
    model_id: Annotated[
        str | None,
        typer.Option(
            "--model-id",
            help="Serving exports: the Hugging Face id or checkpoint directory the engine loads (default: a "
            "preset's Hugging Face id, or the directory of a --model file that holds weights).",
        ),
    ] = None,
    fallbacks_too: Annotated[
        bool,
        typer.Option(
            "--fallbacks",
            help="Training: also compute the plan after losing one node, two nodes, an NVLink domain or a leaf "
            "switch (as a service job does), within 7 s or the time limit when shorter.",
        ),
    ] = False,
    output: Annotated[
        str | None,
        typer.Option(
            "--output",
            "-o",
            help="With --export: write exactly the export's bytes to this file (what sbatch or kubectl apply take); "
            "'-' prints the bare export on stdout and the report on stderr.",
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Find the configuration with the lowest estimated step time (or best serving objective), proven."""
    from pydantic import ValidationError

    from api.cli_inputs import apply_reliability, build_workload, resolve_target
    from optimizer.search.planner import plan as run_plan
    from optimizer.search.result import Progress
    from optimizer.spec.validation_errors import domain_error_from_validation
    from optimizer.spec.workload import TrainingWorkload

    check_output(output, export_to, as_json)
    try:
        spec, clus = resolve_target(target, calibration)
        clus = apply_reliability(clus, reliability)
        work = build_workload(shape, numerics, objective, framework, serving, serving_engine)
        space = plan_space(pin, max_gpus, pools, schedules)
        show = not as_json and sys.stderr.isatty()

        def report(p: Progress) -> None:
            if show:
                best = f"{p.best:.4g} s" if p.best is not None else "-"
                err.print(
                    f"\r  solving: {p.solved} candidates, best {best}, bound {p.bound:.4g} s, {p.elapsed_s:.1f} s",
                    end="",
                )

        result = run_plan(spec, clus, work, space, top_k=top, time_limit_s=time_limit, progress=report)
        if show:
            err.print()
        if fallbacks_too and isinstance(work, TrainingWorkload) and result.plan is not None:
            from optimizer.search.fallbacks import with_fallbacks

            result = with_fallbacks(spec, clus, work, result, space, time_limit)
    except DomainError as exc:
        fail(exc)
    except ValidationError as exc:
        fail(domain_error_from_validation(exc, "space"))
    exports: list[Export] = []
    if export_to is not None and result.plan is not None:
        exports = plan_exports(export_to, result, spec, clus, work, target.model, model_id)
    emit_plan(result, spec.name, clus.name, exports, export_to, output, as_json)
    finish(plan_exit_code(result.status))


def emit_plan(
    result: PlanResult,
    model: str,
    cluster: str,
    exports: list[Export],
    export_to: str | None,
    output: str | None,
    as_json: bool,
) -> None:
    """The plan as JSON or tables, with its exports: printed, or written with --output (the report then on stderr
    when the export goes to stdout)."""
    if output is not None:
        write_export(output, exports, export_to or "")
    if as_json:
        doc = result.model_dump(mode="json")
        if exports:
            doc["export"] = exports[0].model_dump(mode="json")
            doc["exports"] = [e.model_dump(mode="json") for e in exports]
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        with contextlib.redirect_stdout(sys.stderr) if output == "-" else contextlib.nullcontext():
            render_plan(result, model, cluster)  # the console writes to sys.stdout as it is when printing
            for exported in exports:
                if output is None:
                    print_export(exported)
                else:
                    print_notes(exported)


def render_placement(p: object) -> None:
    """The plan's hosts: leaf switch, NVLink domain, stages and TP groups on each; then the shortfalls."""
    from optimizer.placement.result import Placement

    assert isinstance(p, Placement)
    t = Table(title=f"Placement: {len(p.hosts)} hosts, {p.world_size} ranks")
    for col in ("node rank", "host", "pool", "leaf switch", "NVLink domain", "ranks", "stages", "TP groups"):
        t.add_column(col)
    for k, h in enumerate(p.hosts[:64]):
        first, last = h.first_rank // p.tp, (h.first_rank + h.ranks - 1) // p.tp
        t.add_row(
            str(k),
            h.name,
            h.pool,
            h.leaf,
            h.nvlink_domain,
            f"{h.first_rank}-{h.first_rank + h.ranks - 1}",
            ",".join(map(str, h.stages)),
            str(first) if first == last else f"{first}-{last}",
        )
    out.print(t)
    if len(p.hosts) > 64:
        out.print(f"  ... {len(p.hosts) - 64} more hosts (--json lists them all)")
    for d in p.degraded:
        out.print(f"  [yellow]degraded[/yellow]: {d}")


def render_plan(r: object, model: str, cluster: str) -> None:
    """Readable tables of a plan result; the header names the model and the cluster planned on."""
    from optimizer.search.result import PlanResult

    assert isinstance(r, PlanResult)
    gap = f" (gap {r.gap:.1%})" if r.gap else ""
    if r.status == "OPTIMAL" and r.gap and r.lower_bound is not None:  # the decision rule picked near the optimum
        # Why it was kept over the optimum (within the intervals, a published recipe, or memory margin) is the
        # explanation's first sentence: the header only states the distance [issue 53 §3].
        gap = f" (optimum {r.lower_bound:.4g}; this pick is {r.gap:.1%} above it: see the explanation)"
    out.print(
        f"[bold]{r.status}[/bold]{gap} in {r.solve_time_s:.2f} s: {r.candidates_solved} of "
        f"{r.candidates_total} candidates solved with CP-SAT"
    )
    if r.plan is None:
        out.print(f"[red]{r.explanation.summary}[/red]")
        if r.explanation.infeasible:
            for sug in r.explanation.infeasible.suggestions:
                out.print(f"  - {sug.change}: {sug.detail}")
        return
    c = r.plan.config
    out.print(r.explanation.summary)
    if r.fleet is not None:
        render_fleet(r.fleet)
        return
    if r.framework is not None:
        out.print(f"framework: {r.framework}")
    if c.layers_per_stage:
        out.print(f"layers per stage: {c.layers_per_stage}; pools: {sorted(set(c.stage_pools or []))}")
    if r.price_per_step is not None:
        out.print(f"price per step: {r.price_per_step:.4g} (GPUs used x their pools' price_per_gpu_hour)")
    render_estimate(r.plan.estimate, model, cluster)
    if r.placement is not None:
        render_placement(r.placement)
    if r.alternatives:
        t = Table(title="Alternatives")
        for col in ("configuration", r.objective, "delta", "delta, 80%", "differs in"):
            t.add_column(col)
        from optimizer.search.explain import describe

        for a in r.alternatives:
            val = (r.objective_value or 0) + a.delta_s
            band = a.delta_interval_pct
            t.add_row(
                describe(a.config, a.estimate.mode == "inference"),
                f"{val:.4g}",
                f"{a.delta_pct:+.1f}%",
                "" if band is None else f"{band[0]:+.0f}..{band[1]:+.0f}%" + (" same" if a.indistinguishable else ""),
                ", ".join(a.differs_in),
            )
        out.print(t)
    if r.fallbacks:
        render_fallbacks(r)
    for b in r.explanation.binding:
        out.print(f"  {b.kind}: {b.detail}")
    if r.explanation.versus_runner_up:
        out.print(r.explanation.versus_runner_up)


def render_fallbacks(r: object) -> None:
    """The plan after losing nodes, one row per scenario and kind (optimizer/search/fallbacks.py)."""
    from optimizer.search.explain import describe
    from optimizer.search.result import PlanResult

    assert isinstance(r, PlanResult)
    took = f" (computed in {r.fallbacks_time_s:.1f} s)" if r.fallbacks_time_s is not None else ""
    t = Table(title=f"Fallbacks{took}")
    for col in ("loses", "configuration", "step s", "vs plan", "useful tokens/s", "checkpoint"):
        t.add_column(col)
    for f in r.fallbacks:
        t.add_row(
            f.label + (" (preferred)" if f.preferred else ""),
            describe(f.config) if f.config is not None else "-",
            f"{f.step_time_s:.4g}" if f.step_time_s is not None else "-",
            f"{f.step_time_delta_pct:+.1f}%" if f.step_time_delta_pct is not None else "-",
            f"{f.goodput_tokens_per_s:,.0f}" if f.goodput_tokens_per_s is not None else "-",
            "loads as is" if f.checkpoint_compatible else f.reshard,
        )
    out.print(t)


def render_fleet(f: object) -> None:
    """The fleet of an SLA plan, one row per replica group."""
    from optimizer.search.fleet_result import FleetPlan

    assert isinstance(f, FleetPlan)
    t = Table(title=f"{f.mode} fleet: {f.gpus} GPUs, {f.capacity_rate:.4g} req/s within the targets")
    for col in (
        "replicas",
        "role",
        "pool",
        "GPU",
        "tp",
        "pp",
        "dp",
        "ep",
        "req/s each",
        "TTFT p90 ms",
        "TPOT ms",
        "batch",
        "KV blocks",
        "max seqs",
        "max tokens",
    ):
        t.add_column(col)
    for g in f.groups:
        s = g.shape
        t.add_row(
            str(g.count),
            s.role,
            s.pool,
            s.gpu,
            str(s.tp),
            str(s.pp),
            str(s.dp),
            str(s.ep),
            f"{s.rate:.3g}",
            f"{s.ttft_p90_s * 1000:.0f}" if s.ttft_p90_s is not None else "-",
            f"{s.tpot_s * 1000:.1f}" if s.tpot_s is not None else "-",
            f"{s.concurrency:.0f}",
            str(s.kv_blocks),
            str(s.max_seqs),
            str(s.max_batched_tokens),
        )
    out.print(t)
    price = f", {f.price_per_million_tokens:.4g} per million output tokens" if f.price_per_million_tokens else ""
    out.print(f"{f.output_tokens_per_s_per_gpu:.0f} output tokens/s per GPU{price}")
    if f.kv_transfer_s is not None:
        out.print(f"KV transfer prefill -> decode: {f.kv_transfer_s * 1000:.2f} ms per request")


@app.command()
def gpus() -> None:
    """List the built-in GPU catalog."""
    from optimizer.spec.gpu_catalog import BUILTIN_GPUS

    t = Table(title="GPU catalog (dense TFLOP/s; GB/s per direction)")
    for col in ("name", "BF16", "FP8", "GiB", "TB/s", "scale-up GB/s", "domain", "source"):
        t.add_column(col)
    for g in BUILTIN_GPUS.values():
        t.add_row(
            g.name,
            f"{g.bf16_tflops:g}",
            f"{g.fp8_tflops:g}" if g.fp8_tflops else "-",
            f"{g.memory_gib:g}",
            f"{g.memory_tbps:g}",
            f"{g.scaleup_gbytes_per_s:g}",
            str(g.scaleup_domain),
            g.source,
        )
    out.print(t)


@app.command()
def models() -> None:
    """List the model presets with their parameter counts."""
    from optimizer.spec.cluster_loading import cluster_preset_names
    from optimizer.spec.model_loading import load_model_preset, preset_names

    t = Table(title="Model presets")
    for col in ("name", "params (B)", "active (B)", "layers", "hidden", "heads/kv", "vocab"):
        t.add_column(col)
    for name in preset_names():
        m = load_model_preset(name)
        t.add_row(
            name,
            f"{m.num_parameters / 1e9:.1f}",
            f"{m.num_active_parameters / 1e9:.1f}",
            str(m.num_layers),
            str(m.hidden_size),
            f"{m.num_attention_heads}/{m.kv_heads}",
            str(m.vocab_size),
        )
    out.print(t)
    out.print("clusters: " + ", ".join(cluster_preset_names()) + "  (NAME:NODES sets the node count)")


@app.command("import-topo")
def import_topo(
    path: Annotated[Path, typer.Argument(help="File with the output of `nvidia-smi topo -m` ('-' for stdin).")],
    gpu: Annotated[str, typer.Option(help="GPU type of the node.")],
    nodes: Annotated[int, typer.Option(help="Nodes like this one.")] = 1,
    nic_gbps: Annotated[float, typer.Option(help="Line rate of each NIC, Gb/s.")] = 400.0,
    name: Annotated[str, typer.Option(help="Pool name.")] = "pool",
    output: OutputOpt = None,
) -> None:
    """Turn `nvidia-smi topo -m` into a cluster YAML (NVLink vs PCIe inside the node, NIC count)."""
    import yaml

    from optimizer.spec.cluster_loading import cluster_document_from_topo
    from optimizer.spec.yaml_documents import read_document, read_stream

    try:
        text = read_stream(sys.stdin.buffer, "path") if str(path) == "-" else read_document(path, "path")
        spec = cluster_document_from_topo(text, gpu, nodes, nic_gbps, name)
    except DomainError as exc:
        fail(exc)
    write_output(yaml.safe_dump(spec, sort_keys=False), output)


def measured_figures(run: MeasuredRun, work: TrainingWorkload | InferenceWorkload, gpus: int) -> Measurement | None:
    """What a run measured, from its log or a typed-in step time (None when neither is given)."""
    from pydantic import ValidationError

    from optimizer.calibration.measurements import Measurement
    from optimizer.calibration.run_logs import parse_log
    from optimizer.spec.validation_errors import domain_error_from_validation
    from optimizer.spec.yaml_documents import read_document

    if run.log is not None:
        if run.step_time is not None:
            raise DomainError("--measured-step-time", "give a log or a step time, not both")
        return parse_log(read_document(run.log, "--log"), "auto", work, gpus).measurement
    if run.step_time is not None:
        try:
            return Measurement(step_time_s=run.step_time)
        except ValidationError as exc:
            raise domain_error_from_validation(exc, "--measured-step-time") from None
    return None


def render_measured(m: Measurement, e: Estimate) -> None:
    """Measured next to predicted, with the flag the plan page uses (> 20%)."""
    t = Table(title="Measured vs predicted")
    for col in ("figure", "measured", "predicted", "error"):
        t.add_column(col, justify="right")
    if m.step_time_s is not None and e.step_time_s is not None:
        error = e.step_time_s / m.step_time_s - 1
        flag = "  (> 20%: see the breakdown)" if abs(error) > 0.2 else ""
        t.add_row("step time s", f"{m.step_time_s:.4g}", f"{e.step_time_s:.4g}", f"{error:+.1%}{flag}")
    if m.peak_allocated_gb is not None and e.stages:
        pred = e.peak_allocated_gb
        t.add_row(
            "peak allocated GB", f"{m.peak_allocated_gb:.1f}", f"{pred:.1f}", f"{pred / m.peak_allocated_gb - 1:+.1%}"
        )
    Console().print(t)


from api.client_cli import register as register_client  # noqa: E402 - the service client commands too
from api.export_cli import register as register_export  # noqa: E402 - a stored plan's exports
from api.scheduler_cli import register as register_scheduler  # noqa: E402 - scheduler imports and sync
from api.service_cli import register  # noqa: E402 - the service commands join the same CLI

register(app)
register_client(app)
register_export(app)
register_scheduler(app)


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
