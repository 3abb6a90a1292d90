"""The single entry point of the cost model: validate, then estimate one configuration."""

from __future__ import annotations

import math

from optimizer.costmodel.engine_releases import RELEASE_NOVELTY_FACTOR, ReleaseMatch, match_release
from optimizer.costmodel.goodput import plan_goodput
from optimizer.costmodel.inference import estimate_inference
from optimizer.costmodel.placed_fabric import PlacedFabric
from optimizer.costmodel.result import Estimate, StackUsed, admitted
from optimizer.costmodel.serving_load import ReplicaLoad
from optimizer.costmodel.serving_sim import load_latency
from optimizer.costmodel.training import estimate_training
from optimizer.costmodel.uncertainty import with_intervals
from optimizer.frameworks.releases import stack_novelty
from optimizer.frameworks.validation import serving_config, validate
from optimizer.spec.cluster_spec import ClusterSpec
from optimizer.spec.model_spec import ModelSpec
from optimizer.spec.names import priced_framework
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import InferenceWorkload, TrainingWorkload


def estimate(
    model: ModelSpec,
    cluster: ClusterSpec,
    workload: TrainingWorkload | InferenceWorkload,
    config: ParallelConfig,
    fabric: PlacedFabric | None = None,
    *,
    admit: bool = False,
    latency: bool = True,
    goodput_band: bool = True,
) -> Estimate:
    """Memory per stage and step time (training) or TTFT/TPOT (inference) of one configuration.

    Raises DomainError when the configuration breaks a rule; a configuration that is valid but does not fit in
    memory returns feasible=False with the reason. Every estimate carries its 80% intervals from out-of-sample errors
    (costmodel/uncertainty.py) beside the point estimate, which they leave unchanged. `fabric` (training): what a
    placement gives each stage's groups where it is worse than the tiers assume (optimizer/placement prices its own
    placement with it); None prices the tiers' assumption.

    `admit`: the configuration is reported as having run (a measurement posted for it): the estimate is marked
    admitted and, where the model predicts that it does not fit, states the overrun (memory_overrun_gb, reason,
    a note) instead of refusing it; `feasible` keeps the model's verdict.

    `latency` (inference with a rate, a concurrency or a timed trace in the workload): simulate TTFT, TPOT, ITL
    and end-to-end percentiles at that load (load_latency); off where the caller prices one replica of a fleet
    whose rate is spread otherwise.

    `goodput_band` (training): the goodput's 80% band from its inputs' ranges (plan_goodput); off where the caller
    reads only the point (the exhaustive oracle, the accuracy harness).
    """
    if isinstance(workload, InferenceWorkload):
        config = serving_config(config)  # the engines' defaults for unset knobs (etp 1 under EP)
    layout = validate(model, cluster, workload, config)
    if isinstance(workload, TrainingWorkload):
        est = estimate_training(model, cluster, workload, config, layout, fabric)
    else:
        est = estimate_inference(model, cluster, workload, config, layout)
        loaded = workload.rate is not None or workload.concurrency is not None or workload.replays_trace
        if est.feasible and not loaded:
            est = within_admission(est, ReplicaLoad(model, cluster, workload, config, layout))
        if latency and est.feasible and loaded:
            # Attention data parallelism (dp with ep) is inside one replica; plain dp copies the replica.
            replicas = 1 if config.ep > 1 else config.dp
            load = ReplicaLoad(model, cluster, workload, config, layout)
            est = est.model_copy(update={"load_latency": load_latency(load, replicas)})
    if isinstance(workload, TrainingWorkload):
        est.stack = stack_used(cluster, workload)
    est = with_intervals(est, model, cluster, workload, config)
    if isinstance(workload, InferenceWorkload) and workload.engine_version:
        est = with_release(est, match_release(workload.engine, workload.engine_version))
    if isinstance(workload, TrainingWorkload) and est.step_time_s > 0 and math.isfinite(est.step_time_s):
        est.goodput = plan_goodput(model, cluster, workload, config, est, band=goodput_band)
    return admitted(est) if admit else est


def stack_used(cluster: ClusterSpec, workload: TrainingWorkload) -> StackUsed:
    """The stack a training estimate priced and its novelty on the cluster's (first pool's) GPU."""
    framework = priced_framework(workload.framework)
    gpu = cluster.gpu_of(cluster.pools[0])
    nov = stack_novelty(framework, workload.framework_version, gpu, workload.precision)
    return StackUsed(
        framework=framework,
        version=workload.framework_version,
        priced_as=nov.priced_as,
        novelty=[f"{a.axis}: {a.detail}" for a in nov.axes],
    )


def with_release(est: Estimate, match: ReleaseMatch) -> Estimate:
    """The estimate noting the engine release it priced; a release the table lacks widens the serving intervals by
    RELEASE_NOVELTY_FACTOR on each side (its defaults may differ from the nearest release's)."""
    update: dict[str, object] = {"notes": [*est.notes, match.note()]}
    if not match.exact:
        f = RELEASE_NOVELTY_FACTOR
        for name in ("ttft_interval_s", "tpot_interval_s"):
            iv = getattr(est, name)
            if iv is not None:
                update[name] = (iv[0] / f, iv[1] * f)
        update["interval_basis"] = f"{est.interval_basis or ''} Widened x{f:g}: {match.note()}".strip()
    return est.model_copy(update=update)


def admitted_sequences(load: ReplicaLoad) -> int:
    """Sequences of prompt + output tokens the engine holds at once on the replica: its KV cache under its own memory
    rule (ReplicaLoad.kv_tokens: gpu_memory_utilization / mem_fraction_static / free_gpu_memory_fraction, whole
    blocks), each sequence in whole blocks at its full length, and at most max_seqs per attention rank. A paged
    engine starts more and evicts them as they grow (serving_sim.py); a batch that must run together cannot exceed
    this."""
    w, lim = load.w, load.limits
    per_seq = math.ceil((w.prompt_len + w.output_len) / lim.block_tokens) * lim.block_tokens
    return int(min(lim.max_seqs * load.ranks, load.kv_tokens // per_seq))


def within_admission(est: Estimate, load: ReplicaLoad) -> Estimate:
    """A fixed-batch estimate whose batch the engine would not admit at once is not feasible: no estimate assumes
    more concurrent sequences than the engine admits [issue 50 §3]."""
    w, lim = load.w, load.limits
    batch = w.batch * load.ranks
    admits = admitted_sequences(load)
    if batch <= admits:
        return est
    flags = lim.flag_names
    reason = (
        f"{w.engine} admits at most {admits} sequences of {w.prompt_len} + {w.output_len} tokens at once on this "
        f"replica (KV cache {load.kv_tokens:,.0f} tokens under {flags['memory_fraction']} {lim.memory_fraction:g}, "
        f"{lim.block_tokens}-token blocks, {flags['max_seqs']} {lim.max_seqs}); batch {batch} needs more: lower "
        f"--batch, raise --memory-fraction or add GPUs"
    )
    return est.model_copy(update={"feasible": False, "reason": reason})
