"""What an estimate returns (the JSON of `meshplan estimate --json`)."""

from __future__ import annotations

from pydantic import BaseModel, Field


class MemoryBreakdown(BaseModel):
    """Per-GPU memory of one stage, GB (1e9 bytes)."""

    weights: float = Field(description="Transformer-layer weights held by this GPU.")
    gradients: float = Field(description="Gradients of those weights (after ZeRO-2/3 sharding).")
    optimizer: float = Field(description="fp32 master weights and Adam moments (after ZeRO sharding).")
    embedding_lm_head: float = Field(description="Embedding / LM head weights with their gradients and state.")
    activations: float = Field(description="Activations of the micro-batches the schedule keeps in flight.")
    kv_cache: float = Field(description="KV cache (inference).")
    transient: float = Field(description="Largest temporary: logits and loss, ZeRO-3 gathered layers, recompute.")
    reserve: float = Field(description="CUDA context, communicator buffers and allocator fragmentation.")
    total: float = Field(description="Sum of the above.")
    capacity: float = Field(description="Device memory of the GPU.")


class StageEstimate(BaseModel):
    """One pipeline stage (all its GPUs behave alike)."""

    index: int
    pool: str
    gpu: str
    layers: int
    memory_gb: MemoryBreakdown
    fits: bool
    time_s: float = Field(description="Busy time per step (training) or per token step (inference).")
    forward_s: float = Field(description="Forward time per micro-batch incl. exposed TP/CP/EP communication.")
    backward_s: float = Field(description="Backward (+ recompute) time per micro-batch incl. exposed comm.")
    oom_risk: bool = Field(
        default=False,
        description="The point estimate fits but the upper end of the 80% memory interval exceeds the GPU's memory.",
    )


class LatencyPercentiles(BaseModel):
    """One latency over a load's requests."""

    mean_s: float = Field(description="Mean, seconds.")
    p50_s: float = Field(description="Median, seconds.")
    p90_s: float = Field(description="90th percentile, seconds.")
    p99_s: float = Field(description="99th percentile, seconds.")


class LoadLatency(BaseModel):
    """Inference: TTFT, TPOT, ITL and end-to-end percentiles of one replica at a request rate (open loop, Poisson or
    gamma arrivals), a number of concurrent users (closed loop) or the workload trace's own arrivals, simulated over
    the engine's step (costmodel/serving_sim.py)."""

    replicas: int = Field(description="Replicas the load is spread over (the configuration's data-parallel copies).")
    rate_per_replica: float | None = Field(description="Open loop: requests/s offered to each replica.")
    users_per_replica: float | None = Field(description="Closed loop: users per replica.")
    trace_requests_per_replica: int | None = Field(
        default=None, description="Trace replay: the workload trace's requests each replica serves at their times."
    )
    ttft: LatencyPercentiles = Field(description="Time to first token: arrival to the first output token.")
    tpot: LatencyPercentiles = Field(description="Time per output token after the first, per request.")
    itl: LatencyPercentiles | None = Field(
        default=None, description="Inter-token latency: every gap between two output tokens, pooled over requests."
    )
    e2e: LatencyPercentiles | None = Field(default=None, description="End-to-end latency: arrival to the last token.")
    request_rate: float = Field(description="Requests/s each replica completes.")
    output_tokens_per_s: float = Field(description="Output tokens/s of each replica.")
    sustained: bool = Field(description="False: the open-loop queue keeps growing (the rate exceeds the replica).")

    def load_words(self) -> str:
        """The load in words: the trace's requests at their times, a rate (open loop) or users (closed loop)."""
        if self.trace_requests_per_replica is not None:
            return f"the workload trace ({self.trace_requests_per_replica} requests at their own times)"
        if self.rate_per_replica is not None:
            return f"{self.rate_per_replica:.3g} requests/s (open loop)"
        return f"{self.users_per_replica:.3g} users (closed loop)"


class StepBreakdown(BaseModel):
    """Where the step time goes, seconds; the terms add up to step_time_s."""

    forward: float = 0.0
    backward: float = 0.0
    recompute: float = 0.0
    tp_comm: float = 0.0
    cp_comm: float = 0.0
    ep_comm: float = 0.0
    pp_comm: float = 0.0
    offload: float = 0.0
    bubble: float = 0.0
    dp_comm: float = 0.0
    zero_gather: float = 0.0
    optimizer: float = 0.0
    launch: float = 0.0


class StackUsed(BaseModel):
    """The software stack an estimate priced: the framework, the release asked for and the known release it was
    priced as, and the named axes (framework, release, gpu_variant, precision) on which it lies outside the fit."""

    framework: str
    version: str | None = Field(default=None, description="The release asked for (None: the current defaults).")
    priced_as: str | None = Field(default=None, description="The known release it was priced as.")
    novelty: list[str] = Field(
        default_factory=list, description="Named axes outside the fitted runs, as 'axis: detail' (empty: inside)."
    )

    @property
    def novelty_axes(self) -> list[str]:
        """The axis names alone (framework, release, gpu_variant, precision)."""
        return [n.split(":", 1)[0] for n in self.novelty]


MFU_TAG = "model FLOPs incl. attention / dense BF16 peak"
"""The convention in a few words, printed beside every training MFU [issue 48 §6]."""

MFU_TRAINING = (
    "MFU counts model FLOPs as Megatron-Core does (num_floating_point_operations: forward + 2x backward of every "
    "GEMM, the logits and the full, unmasked attention; no recompute), the PaLM definition with attention counted "
    "(Chowdhery et al. 2022, App. B), over the GPUs' dense BF16 peak, also for FP8 runs (HFU adds the recompute)"
)
MFU_INFERENCE = (
    "MFU counts 2 FLOPs per active parameter for every prompt and output token (attention not counted) over the "
    "GPUs' dense BF16 peak, also for FP8 engines"
)


class Estimate(BaseModel):
    """The cost model's verdict on one configuration."""

    mode: str
    feasible: bool
    reason: str | None = None
    gpus: int
    step_time_s: float = Field(description="Training: one optimizer step. Inference: prefill + all decode steps.")
    tokens_per_s: float = Field(description="Training: tokens trained per second. Inference: output tokens/s.")
    mfu: float = Field(description="Model FLOPs utilisation (no recompute FLOPs); its convention: mfu_convention.")
    hfu: float = Field(description="Hardware FLOPs utilisation (recompute counted).")
    mfu_convention: str | None = Field(
        default=None, description="What the MFU counts and over which peak (MFU_TRAINING / MFU_INFERENCE)."
    )
    microbatches: int
    stages: list[StageEstimate]
    breakdown: StepBreakdown
    peak_memory_gb: float
    ttft_s: float | None = None
    tpot_s: float | None = None
    notes: list[str] = Field(default_factory=list)
    step_time_interval_s: tuple[float, float] | None = Field(
        default=None, description="Training: 80% interval of step_time_s, seconds, from out-of-sample errors."
    )
    ttft_interval_s: tuple[float, float] | None = Field(default=None, description="Inference: 80% interval of ttft_s.")
    tpot_interval_s: tuple[float, float] | None = Field(default=None, description="Inference: 80% interval of tpot_s.")
    peak_memory_interval_gb: tuple[float, float] | None = Field(
        default=None, description="80% interval of peak_memory_gb, GB."
    )
    interval_basis: str | None = Field(
        default=None, description="How the intervals were made: the runs and regime used, any widening and why."
    )
    beyond_measured: str | None = Field(
        default=None,
        description="Training: why the prediction lies beyond measured territory (its MFU above the best published "
        "MFU of its GPU family and precision, optimizer/costmodel/published_mfu.py; the interval then reaches the "
        "step time that MFU gives), or None.",
    )
    memory_overrun_gb: float | None = Field(
        default=None,
        description="GB per GPU by which the worst stage's predicted peak (allocated + reserve) exceeds its GPU's "
        "memory, i.e. predicted allocated peak minus usable capacity; None when every stage fits.",
    )
    admitted: bool = Field(
        default=False,
        description="The configuration is reported as having run: priced as given, any memory overrun stated "
        "(memory_overrun_gb, notes) instead of refused.",
    )
    goodput: Goodput | None = Field(
        default=None,
        description="Training: checkpoint size and times, the optimal checkpoint interval, hours lost per day to "
        "failures and the useful tokens per second (optimizer/costmodel/goodput.py); None for serving.",
    )
    stack: StackUsed | None = Field(
        default=None,
        description="Training: the framework release it was priced as and how far that stack lies from the fitted "
        "runs (optimizer/frameworks/releases.py stack_novelty).",
    )
    load_latency: LoadLatency | None = Field(
        default=None,
        description="Inference with a workload rate or concurrency: latency percentiles at that load.",
    )

    @property
    def peak_allocated_gb(self) -> float:
        """The largest stage's memory without the reserve: what torch.cuda.max_memory_allocated reports (the CUDA
        context, NCCL buffers and allocator slack are outside the PyTorch allocator's count)."""
        return max((s.memory_gb.total - s.memory_gb.reserve for s in self.stages), default=0.0)


def memory_overrun_gb(stages: list[StageEstimate]) -> float | None:
    """GB per GPU by which the worst stage's predicted total exceeds its GPU's memory, or None if all fit."""
    over = max((s.memory_gb.total - s.memory_gb.capacity for s in stages), default=0.0)
    return over if over > 0 else None


def memory_shortfall(stages: list[StageEstimate]) -> str | None:
    """Why a configuration does not fit: the stage that overshoots its GPU's memory the most, or None if all fit."""
    over = [s for s in stages if not s.fits]
    if not over:
        return None
    worst = max(over, key=lambda s: s.memory_gb.total / s.memory_gb.capacity)
    return (
        f"stage {worst.index} needs {worst.memory_gb.total:.1f} GB per GPU; {worst.gpu} has "
        f"{gb_and_gib(worst.memory_gb.capacity)}"
    )


def gb_and_gib(gb: float) -> str:
    """A GPU's memory in the decimal GB every figure here uses, and in the GiB its name and datasheet give: an 80 GB
    card holds 85.9 GB [issue 48 §10]."""
    return f"{gb:.1f} GB ({gb * 1e9 / 2**30:.0f} GiB)"


def admitted(est: Estimate) -> Estimate:
    """`est` for a configuration reported as having run: priced as given, and where the model predicts that it
    does not fit, the overrun stated (reason, memory_overrun_gb, a note) instead of a refusal. A run that ran at a
    configuration the model overruns says the model's memory (its reserve or an allocator term) is pessimistic by
    at least that much on this cluster: its measurements bound the reserve when the cluster is calibrated
    (optimizer/calibration/memory_fit.py)."""
    over = memory_overrun_gb(est.stages)
    if over is None:
        return est.model_copy(update={"admitted": True, "memory_overrun_gb": None})
    worst = max(est.stages, key=lambda s: s.memory_gb.total - s.memory_gb.capacity)
    m = worst.memory_gb
    reason = (
        f"reported as run; the model predicts an overrun of {over:.1f} GB per GPU: stage {worst.index} needs "
        f"{m.total:.1f} GB ({m.total - m.reserve:.1f} GB allocated + {m.reserve:.1f} GB reserve) on {worst.gpu} with "
        f"{gb_and_gib(m.capacity)}"
    )
    note = (
        f"Reported as run: the model's memory is at least {over:.1f} GB per GPU pessimistic for this run (its "
        f"{m.reserve:.1f} GB reserve for CUDA context, communicator buffers and allocator slack, or an allocator "
        "term); the cluster's calibration bounds the reserve with it once the run's measurement is recorded."
    )
    return est.model_copy(
        update={"admitted": True, "memory_overrun_gb": over, "reason": reason, "notes": [*est.notes, note]}
    )


class Goodput(BaseModel):
    """What failures and checkpoints cost a training plan (optimizer/costmodel/goodput.py)."""

    checkpoint_gb: float = Field(description="Checkpoint size in all: weights and optimizer state, GB (1e9 bytes).")
    checkpoint_gb_per_rank: float = Field(description="The largest share one rank writes, GB.")
    async_save: bool = Field(description="The framework saves asynchronously (training blocks for the host copy).")
    checkpoint_tier: str = Field(
        default="remote", description="Where a save goes first: remote, local (node disk) or memory (peer replica)."
    )
    write_s: float = Field(description="Seconds to write one checkpoint to the file system.")
    blocking_s: float = Field(description="Seconds training stops per checkpoint (write_s when synchronous).")
    load_s: float = Field(description="Seconds to read the checkpoint back on restart.")
    interval_s: float = Field(
        description="Checkpoint interval as run, seconds of training: the fixed one when the cluster gives one, "
        "else the optimum (Young / Daly) held to at least interval_floor_s."
    )
    interval_steps: int = Field(description="The interval in optimizer steps (at least 1).")
    interval_fixed: bool = Field(default=False, description="The interval is the cluster's fixed one.")
    optimal_interval_s: float = Field(
        default=0.0, description="The optimal interval (Young / Daly within the floor), shown beside a fixed one."
    )
    interval_floor_s: float = Field(
        default=0.0,
        description="Least interval: one step, the previous save made safe, and the write time over the share of "
        "the node's and storage's bandwidth checkpoints may take (reliability checkpoint_bandwidth_share).",
    )
    nodes: int = Field(description="Nodes the plan runs on.")
    spare_nodes: int = Field(description="Healthy nodes of the plan's pools it leaves free (hot spares).")
    failures_per_day: float = Field(description="Expected job interruptions per day on the plan's nodes.")
    mtbf_h: float = Field(description="Mean time between the job's interruptions, hours.")
    detection_s: float = Field(
        default=0.0, description="Expected seconds from a failure to its detection (crash, hang timeout, silent)."
    )
    restart_s: float = Field(
        description="Expected seconds per failure from detection until training resumes: recovery (manual, "
        "automatic relaunch with NCCL initialisation, or elastic), checkpoint load, and the wait for a repaired node "
        "when no spare is free."
    )
    warmup_s: float = Field(default=0.0, description="Seconds of full-speed training lost to warm-up per restart.")
    checkpoint_h_per_day: float = Field(description="Hours per day training stops for checkpoints.")
    rework_h_per_day: float = Field(
        description="Hours per day of work redone: since the last safe checkpoint, and rollbacks after loss spikes."
    )
    detection_h_per_day: float = Field(default=0.0, description="Hours per day until failures are detected.")
    restart_h_per_day: float = Field(description="Hours per day spent recovering from failures (detection aside).")
    warmup_h_per_day: float = Field(default=0.0, description="Hours per day lost to warm-up after restarts.")
    planned_h_per_day: float = Field(
        default=0.0, description="Hours per day of planned restarts, maintenance and evaluation pauses."
    )
    slowdown_h_per_day: float = Field(default=0.0, description="Hours per day lost to stragglers and slow links.")
    lost_h_per_day: float = Field(
        description="All hours lost per day: the sum of the parts above, 24 x (1 - fraction)."
    )
    lost_h_per_day_interval: tuple[float, float] | None = Field(
        default=None, description="80% band of the hours lost per day from the inputs' ranges."
    )
    fraction: float = Field(description="Share of wall time that trains (effective training time ratio), 0-1.")
    fraction_interval: tuple[float, float] | None = Field(
        default=None,
        description="80% band of the fraction from the reliability inputs' ranges (costmodel/goodput.py band_draws; "
        "the step time's own band aside).",
    )
    ettr: float = Field(
        default=0.0,
        description="Effective training time ratio as fleets publish it: the share of wall time training, slow "
        "periods counted as training (fraction + slowdown share).",
    )
    useful_tokens_per_s: float = Field(description="Tokens trained per second of wall time after all losses.")
    useful_tokens_per_s_interval: tuple[float, float] | None = Field(
        default=None, description="80% band of the useful tokens per second (the fraction's band x tokens/s)."
    )
    wall_s_per_step: float = Field(description="Wall seconds per useful optimizer step: step time / fraction.")


Estimate.model_rebuild()
