"""What the command line's options become: the model and cluster, the workload, the parallel configuration
(one conversion each, shared by `meshplan estimate` and `meshplan plan`). Bad input raises a DomainError naming the
option or field."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from pydantic import ValidationError

from api.cli_options import (
    Numerics,
    ParallelOptions,
    PlacementOptions,
    ReliabilityOptions,
    ServingEngine,
    ServingOptions,
    Target,
    WorkloadShape,
)
from optimizer.calibration.restart_history import (
    LogHistory,
    RestartHistory,
    log_applied_to,
    parse_sacct,
    parse_training_log,
)
from optimizer.errors import DomainError
from optimizer.spec.calibration import ClusterCalibration
from optimizer.spec.cluster_loading import resolve_cluster
from optimizer.spec.cluster_spec import ClusterSpec
from optimizer.spec.model_loading import resolve_model
from optimizer.spec.model_spec import ModelSpec
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.pipeline_layout import layout_vp
from optimizer.spec.validation_errors import domain_error_from_validation
from optimizer.spec.workload import InferenceWorkload, TrainingWorkload
from optimizer.spec.workload_loading import build_config, build_inference, build_training, parse_int_list
from optimizer.spec.workload_trace import parse_trace
from optimizer.spec.yaml_documents import read_document, shown_path, yaml_mapping


def resolve_target(target: Target, calibration: Path | None) -> tuple[ModelSpec, ClusterSpec]:
    """The model and the cluster (with the calibration file's constants, when one is given)."""
    spec = resolve_model(target.model)
    clus = resolve_cluster(target.cluster).with_calibration(load_calibration(calibration) if calibration else None)
    return spec, clus


RECOVERY_MODES = ("manual", "automatic", "elastic")
CHECKPOINT_TIERS = ("remote", "local", "memory")


def restart_history_file(path: Path) -> RestartHistory:
    """A run's sacct records from a file (bad content names the option and the line)."""
    text = read_document(path, "--restart-history")  # refuses directories, devices, FIFOs and huge files
    try:
        return parse_sacct(text)
    except DomainError as e:
        raise DomainError("--restart-history", f"{e.field}: {e.rule}") from None


def training_log_file(path: Path) -> LogHistory:
    """A run's Megatron-LM training log from a file (bad content names the option)."""
    text = read_document(path, "--training-log")
    try:
        return parse_training_log(text)
    except DomainError as e:
        raise DomainError("--training-log", e.rule) from None


def apply_reliability(clus: ClusterSpec, r: ReliabilityOptions) -> ClusterSpec:
    """The cluster with the command line's failure rate, checkpoint bandwidth and spares on every pool (a bad
    value names its option)."""
    given = (
        r.recovery,
        r.collective_timeout,
        r.checkpoint_interval,
        r.checkpoint_tier,
        r.restart_history,
        r.training_log,
    )
    if r.failure_rate is None and r.checkpoint_gbps is None and r.spares is None and all(g is None for g in given):
        return clus
    choices = {"--recovery": (r.recovery, RECOVERY_MODES), "--checkpoint-tier": (r.checkpoint_tier, CHECKPOINT_TIERS)}
    for option, (value, allowed) in choices.items():
        if value is not None and value not in allowed:
            raise DomainError(option, f"must be one of {', '.join(allowed)} (got {value!r})")
    for option, v, top in (
        ("--collective-timeout", r.collective_timeout, 7 * 86_400),
        ("--checkpoint-interval", r.checkpoint_interval, 30 * 86_400),
    ):
        if v is not None and not 0 < v <= top:
            raise DomainError(option, f"must be > 0 and <= {top} seconds (got {v:g})")
    history = restart_history_file(r.restart_history) if r.restart_history is not None else None
    log = training_log_file(r.training_log) if r.training_log is not None else None
    if r.failure_rate is not None and not 0 < r.failure_rate <= 1_000_000:
        raise DomainError(
            "--failure-rate", f"must be > 0 and <= 1000000 interruptions per 1,000 node-days (got {r.failure_rate:g})"
        )
    if r.checkpoint_gbps is not None and not 0 < r.checkpoint_gbps <= 100_000:
        raise DomainError("--checkpoint-gbps", f"must be > 0 and <= 100000 GB/s per node (got {r.checkpoint_gbps:g})")
    if r.spares is not None and r.spares < 0:
        raise DomainError("--spares", f"must be >= 0 nodes (got {r.spares})")
    pools = []
    for p in clus.pools:
        if r.spares is not None and r.spares >= p.node_count:
            raise DomainError(
                "--spares", f"{r.spares} spare nodes leave pool {p.name} ({p.node_count} nodes) none to plan on"
            )
        rel = p.reliability_or_default
        if r.failure_rate is not None:
            rel = rel.with_total_rate(r.failure_rate)
        update: dict[str, object] = {}
        if r.checkpoint_gbps is not None:
            update |= {
                "checkpoint_write_gbytes_per_s_per_node": r.checkpoint_gbps,
                "checkpoint_read_gbytes_per_s_per_node": r.checkpoint_gbps,
            }
        if r.spares is not None:
            update["spare_nodes"] = r.spares
        fields: tuple[tuple[str, object], ...] = (
            ("recovery", r.recovery),
            ("collective_timeout_s", r.collective_timeout),
            ("checkpoint_interval_s", r.checkpoint_interval),
            ("checkpoint_tier", r.checkpoint_tier),
        )
        for name, given_value in fields:
            if given_value is not None:
                update[name] = given_value
        if history is not None:  # the history's own node count (NNodes), else the pool's
            rel = history.applied_to(rel, nodes=history.nodes or p.node_count)
        if log is not None:  # the nodes the history names, else the pool's less its held spares
            nodes = history.nodes if history is not None and history.nodes else p.node_count - (r.spares or 0)
            rel = log_applied_to(log, rel, nodes)
        pools.append(p.model_copy(update={"reliability": rel.model_copy(update=update)}))
    return clus.model_copy(update={"pools": pools})


def load_calibration(path: Path) -> ClusterCalibration:
    """A calibration document from a file (bad content names the field)."""
    doc = yaml_mapping(read_document(path, "--calibration"), "--calibration", str(path), "with `pools`")
    if "pools" not in doc and isinstance(doc.get("constants"), dict):  # as GET .../calibrations lists one
        doc = doc["constants"]
    if not isinstance(doc.get("pools"), dict):  # a model file or an inventory used to be read as no calibration
        raise DomainError("--calibration", f"{shown_path(path)} must hold `pools`: constants by pool name")
    try:
        return ClusterCalibration.model_validate({k: v for k, v in doc.items() if k in ("pools", "version")})
    except ValidationError as exc:
        raise domain_error_from_validation(exc, "calibration") from None


def build_workload(
    shape: WorkloadShape,
    numerics: Numerics,
    objective: str | None,
    framework: str,
    serving: ServingOptions | None = None,
    engine: ServingEngine | None = None,
    concurrency: int | None = None,
) -> TrainingWorkload | InferenceWorkload:
    """The training or inference workload the options describe (serving and engine options apply to inference
    only)."""
    if shape.mode == "training":
        if shape.gbs is None or shape.seq_len is None:
            raise DomainError("workload", "training needs --gbs and --seq-len")
        return build_training(
            global_batch_size=shape.gbs,
            seq_len=shape.seq_len,
            precision=numerics.precision,
            objective=objective or "step_time",
            framework=framework,
            grad_dtype=numerics.grad_dtype,
            fused_loss=numerics.fused_loss,
            fp8_param_gather=numerics.fp8_param_gather or None,
            precision_aware_optimizer=numerics.precision_aware_optimizer or None,
            attention_kernel=numerics.attention_kernel,
            cuda_graphs=numerics.cuda_graphs,
            framework_version=numerics.framework_version,
            fp8_recipe=numerics.fp8_recipe,
        )
    if shape.mode == "inference":
        serving = serving or ServingOptions()
        options = dataclasses.asdict(serving)
        trace_file = options.pop("workload_trace")
        trace = (
            None
            if trace_file is None
            else parse_trace(read_document(trace_file, "--workload-trace"), "--workload-trace")
        )
        if trace is None and (shape.prompt_len is None or shape.output_len is None):
            raise DomainError("workload", "inference needs --prompt-len and --output-len (or --workload-trace)")
        knobs = dataclasses.asdict(engine or ServingEngine())
        eager = knobs.pop("enforce_eager")
        return build_inference(
            prompt_len=shape.prompt_len,
            output_len=shape.output_len,
            batch=shape.batch,
            precision=numerics.precision,
            objective=objective or serving_objective(serving),
            concurrency=concurrency,
            cuda_graphs=False if eager else None,
            workload_trace=trace,
            **options,
            **knobs,
        )
    raise DomainError("mode", f"must be training or inference (got {shape.mode!r})")


def serving_objective(serving: ServingOptions) -> str:
    """The default serving objective: fewest GPUs for a rate, the most rate for latency targets alone, else the
    time per output token."""
    if serving.rate is not None:
        return "gpus"
    if serving.ttft_ms is not None or serving.tpot_ms is not None:
        return "max_rate"
    return "latency"


def build_parallel_config(parallel: ParallelOptions, placement: PlacementOptions) -> ParallelConfig:
    """The one parallel configuration `estimate` prices; a pipeline layout without --vp gives the virtual stages.
    The options carry ParallelConfig's field names; the ones below are the options' text turned into its values."""
    fields = {**dataclasses.asdict(parallel), **dataclasses.asdict(placement)}
    vp = parallel.vp
    if placement.pipeline_layout is not None and vp == 1:  # the layout's stages over pp ranks give the virtual stages
        vp = layout_vp(placement.pipeline_layout, parallel.pp)
    modules, pools = parallel.recompute_modules, placement.stage_pools
    fields.update(
        vp=vp,
        schedule=parallel.schedule or ("interleaved-1f1b" if vp > 1 else "1f1b"),
        recompute_modules=modules.split(",") if modules is not None else None,
        layers_per_stage=parse_int_list(placement.layers_per_stage, "config.layers_per_stage"),
        stage_pools=pools.split(",") if pools else None,
        overlap_grad_reduce=not fields.pop("no_grad_overlap"),
    )
    return build_config(**fields)
