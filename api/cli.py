"""The `meshplan` command line."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.table import Table

from api.cli_output import err, fail
from optimizer.calibration.measurements import Measurement
from optimizer.calibration.run_logs import parse_log
from optimizer.costmodel.estimate import estimate as run_estimate
from optimizer.costmodel.result import Estimate
from optimizer.errors import DomainError
from optimizer.exports.launch import Export
from optimizer.spec.calibration import ClusterCalibration
from optimizer.spec.cluster_loading import cluster_document_from_topo, cluster_preset_names, resolve_cluster
from optimizer.spec.gpu_catalog import BUILTIN_GPUS
from optimizer.spec.model_loading import load_model_preset, preset_names, resolve_model
from optimizer.spec.pipeline_layout import layout_vp
from optimizer.spec.validation_errors import domain_error_from_validation
from optimizer.spec.workload import InferenceWorkload, TrainingWorkload
from optimizer.spec.workload_loading import build_config, build_inference, build_training, parse_int_list
from optimizer.spec.yaml_documents import read_document, yaml_mapping

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="meshplan: split a large transformer over a GPU cluster.",
)
out = Console(width=None if sys.stdout.isatty() else 150)


ModelOpt = Annotated[str, typer.Option(help="Preset name, HuggingFace config.json or model.yaml.")]
ClusterOpt = Annotated[str, typer.Option(help="Preset (dgx-h100, dgx-h100:16 for 16 nodes) or cluster.yaml.")]
ModeOpt = Annotated[str, typer.Option(help="training or inference.")]
GbsOpt = Annotated[int | None, typer.Option(help="Global batch, sequences (training).")]
SeqLenOpt = Annotated[int | None, typer.Option(help="Sequence length, tokens (training).")]
BatchOpt = Annotated[int | None, typer.Option(help="Concurrent sequences (inference).")]
PromptOpt = Annotated[int | None, typer.Option(help="Prompt tokens (inference).")]
OutputOpt = Annotated[int | None, typer.Option(help="Generated tokens (inference).")]
EngineOpt = Annotated[str | None, typer.Option(help="Serving engine: vllm (default), sglang, trtllm.")]
RateOpt = Annotated[float | None, typer.Option(help="Requests/s the fleet must serve (SLA plan; objective gpus/cost).")]
TtftOpt = Annotated[float | None, typer.Option("--ttft-ms", help="TTFT target, p90, ms (SLA plan).")]
TpotOpt = Annotated[float | None, typer.Option("--tpot-ms", help="TPOT target, mean, ms (SLA plan).")]
KvDtypeOpt = Annotated[str | None, typer.Option(help="KV-cache type: bf16, fp16, fp8 (inference).")]
WeightDtypeOpt = Annotated[str | None, typer.Option(help="Stored weights: bf16, fp16, fp8, int4 (inference).")]
CvOpt = Annotated[float | None, typer.Option(help="Length spread, standard deviation / mean (SLA plans).")]
DisaggOpt = Annotated[str | None, typer.Option(help="SLA plans: auto (default), on (prefill/decode instances), off.")]
ObjectiveOpt = Annotated[
    str | None,
    typer.Option(help="Training: step_time (default) or cost (needs pool prices). Inference: latency or throughput."),
]
PrecisionOpt = Annotated[str, typer.Option(help="bf16, fp16 or fp8.")]
GradDtypeOpt = Annotated[
    str,
    typer.Option(
        help="Training: dtype of the accumulated gradients, fp32 (Megatron's default main grads) or bf16 "
        "(--grad-reduce-in-bf16 / FSDP reduce_dtype)."
    ),
]
FusedLossOpt = Annotated[
    bool | None,
    typer.Option(
        "--fused-loss/--unfused-loss",
        help="Training: the loss is a fused cross entropy (no fp32 logits beside their gradient) or the unfused "
        "fp32 one; unset: the framework's default (torchtitan eager: unfused).",
    ),
]
Fp8ParamsOpt = Annotated[
    bool,
    typer.Option(
        "--fp8-param-gather",
        help="Training with --precision fp8 on Megatron: FP8 primary weights (no bf16 copy, FP8 all-gather), as "
        "Megatron-Bridge's FP8 recipes run.",
    ),
]
AttentionKernelOpt = Annotated[
    str | None,
    typer.Option(
        "--attention-kernel",
        help="Training: fused-attention kernel generation, fa3 (FlashAttention-3 / cuDNN on Hopper and newer) or "
        "fa2 (FlashAttention-2 class: flash-attn 2.x, stacks before mid-2024); unset: the framework's default.",
    ),
]
CudaGraphsOpt = Annotated[
    str | None,
    typer.Option(
        "--cuda-graphs",
        help="Training: CUDA graphs the stack captures, none, layers (attention, MoE router and preprocess; "
        "dropless experts stay eager) or full_iteration (Megatron --cuda-graph-impl full_iteration); unset: none.",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]
CalibrationOpt = Annotated[
    Path | None,
    typer.Option(help="A cluster calibration (JSON or YAML: pools -> constants, as GET .../calibrations gives)."),
]


FrameworkOpt = Annotated[
    str,
    typer.Option(
        help="Training framework: megatron, deepspeed, torchtitan; plan also takes auto (each, keep the best)."
    ),
]


@app.command()
def estimate(
    model: ModelOpt,
    cluster: ClusterOpt,
    mode: ModeOpt = "training",
    gbs: GbsOpt = None,
    seq_len: SeqLenOpt = None,
    batch: BatchOpt = None,
    prompt_len: PromptOpt = None,
    output_len: OutputOpt = None,
    tp: Annotated[int, typer.Option(help="Tensor-parallel degree.")] = 1,
    pp: Annotated[int, typer.Option(help="Pipeline-parallel degree.")] = 1,
    dp: Annotated[int, typer.Option(help="Data-parallel degree.")] = 1,
    cp: Annotated[int, typer.Option(help="Context-parallel degree.")] = 1,
    ep: Annotated[int, typer.Option(help="Expert-parallel degree.")] = 1,
    etp: Annotated[int | None, typer.Option(help="Expert tensor-parallel degree (default: tp).")] = None,
    vp: Annotated[int, typer.Option(help="Virtual stages per pipeline rank.")] = 1,
    mbs: Annotated[int, typer.Option(help="Micro-batch size.")] = 1,
    schedule: Annotated[str | None, typer.Option(help="gpipe, 1f1b, interleaved-1f1b, zb-h1.")] = None,
    sp: Annotated[bool, typer.Option("--sp", help="Sequence parallelism.")] = False,
    zero: Annotated[int, typer.Option(help="ZeRO stage 0-3 (1 = distributed optimizer).")] = 0,
    recompute: Annotated[str, typer.Option(help="none, selective or full.")] = "none",
    recompute_modules: Annotated[
        str | None,
        typer.Option(
            help="With --recompute selective: Megatron --recompute-modules, comma-separated (core_attn, layernorm, "
            "mla_up_proj, moe_act, mlp, moe, shared_experts)."
        ),
    ] = None,
    precision: PrecisionOpt = "bf16",
    grad_dtype: GradDtypeOpt = "fp32",
    fused_loss: FusedLossOpt = None,
    fp8_param_gather: Fp8ParamsOpt = False,
    attention_kernel: AttentionKernelOpt = None,
    cuda_graphs: CudaGraphsOpt = None,
    layers_per_stage: Annotated[str | None, typer.Option(help="Uneven split, e.g. 19,21,21,19.")] = None,
    layout: Annotated[
        str | None,
        typer.Option(help="Megatron --pipeline-model-parallel-layout, e.g. 'Et*2|(t*2|)*34,t*3|(t*2|)*3,tL'."),
    ] = None,
    stage_pools: Annotated[str | None, typer.Option(help="Pool per stage, comma-separated.")] = None,
    tp_comm_overlap: Annotated[bool, typer.Option("--tp-comm-overlap", help="Overlap TP comm (needs --sp).")] = False,
    no_grad_overlap: Annotated[bool, typer.Option("--no-grad-overlap", help="Do not overlap DP reduction.")] = False,
    ep_comm_overlap: Annotated[
        bool, typer.Option("--ep-comm-overlap", help="Overlap the EP all-to-all across micro-batches (Megatron).")
    ] = False,
    ep_dispatch: Annotated[
        str,
        typer.Option(
            "--ep-dispatch",
            help="MoE token dispatch: alltoall, or deepep (one copy per destination node over the network, "
            "forwarded over NVLink: DeepEP / HybridEP, Megatron --moe-token-dispatcher-type flex).",
        ),
    ] = "alltoall",
    offload_layers: Annotated[
        int,
        typer.Option(
            "--offload-layers",
            min=0,
            help="Training: layers whose activations go to host memory (Megatron --cpu-offloading-num-layers; "
            "pp 1, no recompute).",
        ),
    ] = 0,
    redundant_experts: Annotated[
        int,
        typer.Option(
            "--redundant-experts",
            min=0,
            max=4096,
            help="Serving: extra expert replicas over the EP ranks (SGLang --ep-num-redundant-experts, vLLM EPLB).",
        ),
    ] = 0,
    objective: ObjectiveOpt = None,
    framework: FrameworkOpt = "megatron",
    calibration: CalibrationOpt = None,
    measured_log: Annotated[
        Path | None, typer.Option("--log", help="A run's log: print measured vs predicted (offline measurement).")
    ] = None,
    measured_step_time: Annotated[
        float | None, typer.Option("--measured-step-time", help="A run's seconds per step, to compare.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Predict per-GPU memory and step time (or TTFT/TPOT) of ONE parallel configuration."""
    try:
        spec = resolve_model(model)
        clus = resolve_cluster(cluster).with_calibration(load_calibration(calibration) if calibration else None)
        work = _workload(
            mode,
            gbs,
            seq_len,
            batch,
            prompt_len,
            output_len,
            precision,
            objective,
            framework,
            grad_dtype,
            fused_loss=fused_loss,
            fp8_param_gather=fp8_param_gather,
            attention_kernel=attention_kernel,
            cuda_graphs=cuda_graphs,
        )
        if layout is not None and vp == 1:  # the layout's stages over pp ranks give the virtual stages
            vp = layout_vp(layout, pp)
        sched = schedule or ("interleaved-1f1b" if vp > 1 else "1f1b")
        config = build_config(
            tp=tp,
            pp=pp,
            dp=dp,
            cp=cp,
            ep=ep,
            etp=etp,
            vp=vp,
            mbs=mbs,
            schedule=sched,
            sequence_parallel=sp,
            zero_stage=zero,
            recompute=recompute,
            recompute_modules=recompute_modules.split(",") if recompute_modules is not None else None,
            layers_per_stage=parse_int_list(layers_per_stage, "config.layers_per_stage"),
            pipeline_layout=layout,
            stage_pools=stage_pools.split(",") if stage_pools else None,
            tp_comm_overlap=tp_comm_overlap,
            ep_comm_overlap=ep_comm_overlap,
            ep_dispatch=ep_dispatch,
            redundant_experts=redundant_experts,
            offload_layers=offload_layers,
            overlap_grad_reduce=not no_grad_overlap,
        )
        result = run_estimate(spec, clus, work, config)
        measured = measured_figures(measured_log, measured_step_time, work, config.gpus)
    except DomainError as exc:
        fail(exc)
    if as_json:
        doc = estimate_json(result)
        if measured is not None:
            doc["measured"] = measured.model_dump(mode="json", exclude_none=True)
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        render_estimate(result, spec.name, clus.name)
        if measured is not None:
            render_measured(measured, result)


def estimate_json(result: Estimate) -> dict[str, object]:
    """The documented JSON shape of an estimate."""
    return result.model_dump(mode="json", exclude_none=False)


def render_estimate(e: Estimate, model: str, cluster: str) -> None:
    """Readable tables: verdict, per-stage memory, time breakdown."""
    verdict = "[green]fits[/green]" if e.feasible else f"[red]does not fit[/red]: {e.reason}"
    out.print(f"[bold]{model}[/bold] on [bold]{cluster}[/bold] ({e.gpus} GPUs, {e.mode}): {verdict}")
    if e.mode == "training":
        out.print(
            f"step time {e.step_time_s:.3f} s | {e.tokens_per_s:,.0f} tokens/s | MFU {e.mfu:.1%} | "
            f"HFU {e.hfu:.1%} | {e.microbatches} micro-batches"
        )
    else:
        out.print(
            f"TTFT {1000 * (e.ttft_s or 0):.1f} ms | TPOT {1000 * (e.tpot_s or 0):.2f} ms | "
            f"{e.tokens_per_s:,.0f} output tokens/s"
        )
    mem = Table(title="Per-GPU memory by stage (GB)")
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


@app.command()
def plan(
    model: ModelOpt,
    cluster: ClusterOpt,
    mode: ModeOpt = "training",
    gbs: GbsOpt = None,
    seq_len: SeqLenOpt = None,
    batch: BatchOpt = None,
    prompt_len: PromptOpt = None,
    output_len: OutputOpt = None,
    objective: ObjectiveOpt = None,
    precision: PrecisionOpt = "bf16",
    grad_dtype: GradDtypeOpt = "fp32",
    fused_loss: FusedLossOpt = None,
    fp8_param_gather: Fp8ParamsOpt = False,
    attention_kernel: AttentionKernelOpt = None,
    cuda_graphs: CudaGraphsOpt = None,
    framework: FrameworkOpt = "megatron",
    engine: EngineOpt = None,
    rate: RateOpt = None,
    ttft_ms: TtftOpt = None,
    tpot_ms: TpotOpt = None,
    kv_cache_dtype: KvDtypeOpt = None,
    weight_dtype: WeightDtypeOpt = None,
    disaggregation: DisaggOpt = None,
    prompt_len_cv: CvOpt = None,
    output_len_cv: CvOpt = None,
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
        str | None, typer.Option("--export", help="megatron, deepspeed, torchtitan, vllm, sglang.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Find the configuration with the lowest estimated step time (or best serving objective), proven."""
    from optimizer.search.planner import plan as run_plan
    from optimizer.search.result import Progress
    from optimizer.search.space import SearchSpace, parse_pins

    try:
        spec = resolve_model(model)
        clus = resolve_cluster(cluster).with_calibration(load_calibration(calibration) if calibration else None)
        serving: dict[str, object] = {
            "engine": engine,
            "rate": rate,
            "ttft_ms": ttft_ms,
            "tpot_ms": tpot_ms,
            "kv_cache_dtype": kv_cache_dtype,
            "weight_dtype": weight_dtype,
            "disaggregation": disaggregation,
            "prompt_len_cv": prompt_len_cv,
            "output_len_cv": output_len_cv,
        }
        work = _workload(
            mode,
            gbs,
            seq_len,
            batch,
            prompt_len,
            output_len,
            precision,
            objective,
            framework,
            grad_dtype,
            serving=serving,
            fused_loss=fused_loss,
            fp8_param_gather=fp8_param_gather,
            attention_kernel=attention_kernel,
            cuda_graphs=cuda_graphs,
        )
        space_fields: dict[str, object] = {"pins": parse_pins(pin or []), "max_gpus": max_gpus}
        if pools:
            space_fields["pools"] = tuple(pools.split(","))
        if schedules:
            space_fields["schedules"] = tuple(schedules.split(","))
        space = SearchSpace.model_validate(space_fields)
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
    except DomainError as exc:
        fail(exc)
    except ValidationError as exc:
        fail(domain_error_from_validation(exc, "space"))
    exports: list[Export] = []
    if export_to is not None and result.plan is not None:
        from optimizer.exports.launch import export as run_export
        from optimizer.exports.launch import export_fleet

        try:
            if result.fleet is not None and isinstance(work, InferenceWorkload):
                exports = export_fleet(export_to, spec, work, result.fleet, model_ref=model)
            else:
                exports = [
                    run_export(export_to, spec, work, result.plan.config, model_ref=model, framework=result.framework)
                ]
        except DomainError as exc:
            fail(exc)
    if as_json:
        doc = result.model_dump(mode="json")
        if exports:
            doc["export"] = exports[0].model_dump(mode="json")
            doc["exports"] = [e.model_dump(mode="json") for e in exports]
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        return
    render_plan(result)
    for exported in exports:
        out.print(f"[bold]{exported.tool}[/bold]:")
        for k, v in exported.env.items():
            out.print(f"export {k}={v}", markup=False, highlight=False)
        out.print(exported.content, markup=False, highlight=False)
        for note in exported.notes:
            out.print(f"  note: {note}", markup=False)


def _workload(
    mode: str,
    gbs: int | None,
    seq_len: int | None,
    batch: int | None,
    prompt_len: int | None,
    output_len: int | None,
    precision: str,
    objective: str | None,
    framework: str = "megatron",
    grad_dtype: str = "fp32",
    *,
    serving: dict[str, object] | None = None,
    fused_loss: bool | None = None,
    fp8_param_gather: bool = False,
    attention_kernel: str | None = None,
    cuda_graphs: str | None = None,
) -> TrainingWorkload | InferenceWorkload:
    if mode == "training":
        if gbs is None or seq_len is None:
            raise DomainError("workload", "training needs --gbs and --seq-len")
        return build_training(
            global_batch_size=gbs,
            seq_len=seq_len,
            precision=precision,
            objective=objective or "step_time",
            framework=framework,
            grad_dtype=grad_dtype,
            fused_loss=fused_loss,
            fp8_param_gather=fp8_param_gather or None,
            attention_kernel=attention_kernel,
            cuda_graphs=cuda_graphs,
        )
    if mode == "inference":
        if prompt_len is None or output_len is None:
            raise DomainError("workload", "inference needs --prompt-len and --output-len")
        return build_inference(
            prompt_len=prompt_len,
            output_len=output_len,
            batch=batch,
            precision=precision,
            objective=objective or _serving_objective(serving or {}),
            **(serving or {}),
        )
    raise DomainError("mode", f"must be training or inference (got {mode!r})")


def _serving_objective(serving: dict[str, object]) -> str:
    """The default serving objective: fewest GPUs for a rate, the most rate for latency targets alone, else the
    time per output token."""
    if serving.get("rate") is not None:
        return "gpus"
    if serving.get("ttft_ms") is not None or serving.get("tpot_ms") is not None:
        return "max_rate"
    return "latency"


def render_plan(r: object) -> None:
    """Readable tables of a plan result."""
    from optimizer.search.result import PlanResult

    assert isinstance(r, PlanResult)
    gap = f" (gap {r.gap:.1%})" if r.gap else ""
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
    render_estimate(r.plan.estimate, "plan", "cluster")
    if r.alternatives:
        t = Table(title="Alternatives")
        for col in ("configuration", r.objective, "delta", "differs in"):
            t.add_column(col)
        from optimizer.search.explain import describe

        for a in r.alternatives:
            val = (r.objective_value or 0) + a.delta_s
            t.add_row(
                describe(a.config, a.estimate.mode == "inference"),
                f"{val:.4g}",
                f"+{a.delta_pct:.1f}%",
                ", ".join(a.differs_in),
            )
        out.print(t)
    for b in r.explanation.binding:
        out.print(f"  {b.kind}: {b.detail}")
    if r.explanation.versus_runner_up:
        out.print(r.explanation.versus_runner_up)


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
) -> None:
    """Turn `nvidia-smi topo -m` into a cluster YAML (NVLink vs PCIe inside the node, NIC count)."""
    import yaml

    try:
        text = sys.stdin.read() if str(path) == "-" else path.read_text()
        spec = cluster_document_from_topo(text, gpu, nodes, nic_gbps, name)
    except OSError as exc:
        fail(DomainError("path", f"cannot read {path}: {exc.strerror}"))
    except DomainError as exc:
        fail(exc)
    sys.stdout.write(yaml.safe_dump(spec, sort_keys=False))


def load_calibration(path: Path) -> ClusterCalibration:
    """A calibration document from a file (bad content names the field)."""
    doc = yaml_mapping(read_document(path, "--calibration"), "--calibration", str(path), "with `pools`")
    try:
        return ClusterCalibration.model_validate({k: v for k, v in doc.items() if k in ("pools", "version")})
    except ValidationError as exc:
        raise domain_error_from_validation(exc, "calibration") from None


def measured_figures(
    log: Path | None, step_time: float | None, work: TrainingWorkload | InferenceWorkload, gpus: int
) -> Measurement | None:
    """What a run measured, from its log or a typed-in step time (None when neither is given)."""
    if log is not None:
        if step_time is not None:
            raise DomainError("--measured-step-time", "give a log or a step time, not both")
        return parse_log(read_document(log, "--log"), "auto", work, gpus).measurement
    if step_time is not None:
        try:
            return Measurement(step_time_s=step_time)
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
from api.service_cli import register  # noqa: E402 - the service commands join the same CLI

register(app)
register_client(app)


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
