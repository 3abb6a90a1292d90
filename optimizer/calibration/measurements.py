"""What a run measured, against the configuration it ran: the input of per-cluster calibration [issue 14]."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from optimizer.errors import DomainError
from optimizer.spec.workload import RELEASE_PATTERN, InferenceWorkload, TrainingWorkload

MeasuredFramework = Literal["megatron", "deepspeed", "torchtitan", "nemo", "vllm", "sglang", "trtllm", "other"]
LogSource = Literal["manual", "megatron", "torchtitan", "deepspeed", "nemo", "vllm", "sglang", "trace"]
PhaseName = Annotated[str, StringConstraints(min_length=1, max_length=64)]
# Megatron-LM level 2 logs about 25 timers; a trace's breakdown about 20 figures (calibration/trace_breakdown.py).
MAX_PHASES = 64

# A step longer than a day or a GPU with more than 10 TB is a typing error, not a measurement.
MAX_STEP_S = 86_400.0
MAX_MEMORY_GB = 10_000.0
# Measured stacks that the cost model prices as another: NeMo trains with Megatron-Core [NeMo docs, "NeMo 2.0 uses
# Megatron-Core for model parallelism"].
SAME_STACK = {"nemo": "megatron"}


class Measurement(BaseModel):
    """One run's measured figures (medians over `steps` steps after warm-up)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    step_time_s: float | None = Field(default=None, gt=0, le=MAX_STEP_S, description="Seconds per training step.")
    tokens_per_s: float | None = Field(
        default=None, gt=0, le=1e12, description="Training tokens per second, whole job (or serving output tokens/s)."
    )
    peak_allocated_gb: float | None = Field(
        default=None, gt=0, le=MAX_MEMORY_GB, description="torch.cuda.max_memory_allocated per GPU, GB (1e9 B)."
    )
    peak_reserved_gb: float | None = Field(
        default=None, gt=0, le=MAX_MEMORY_GB, description="torch.cuda.max_memory_reserved per GPU, GB (1e9 B)."
    )
    stage_times_s: list[float] | None = Field(
        default=None, max_length=4096, description="Per pipeline stage busy time per step, seconds."
    )
    phases_s: dict[PhaseName, float] | None = Field(
        default=None,
        max_length=MAX_PHASES,
        description="Seconds per step by phase, named as the run's timers or trace name them (Megatron-LM's "
        "forward-backward, all-grads-sync, optimizer; DeepSpeed's fwd, bwd, step; a profiler trace's gemm, attention, "
        "exposed_comm, exposed_all_reduce, idle ...); phases may overlap and need not add up to the step.",
    )
    ttft_s: float | None = Field(default=None, gt=0, le=MAX_STEP_S, description="Serving: time to first token, s.")
    tpot_s: float | None = Field(default=None, gt=0, le=MAX_STEP_S, description="Serving: time per output token, s.")
    framework: MeasuredFramework | None = Field(default=None, description="What ran.")
    framework_version: str = Field(default="", max_length=64, description="Its version (e.g. core_r0.13.0).")
    steps: int | None = Field(default=None, ge=1, le=100_000_000, description="Steps the figures are a median of.")
    source: LogSource = Field(default="manual", description="Typed in, or the log format it was parsed from.")
    note: str = Field(default="", max_length=2000, description="Free text.")
    unmodelled: list[str] = Field(
        default_factory=list,
        max_length=20,
        description="Knobs the run used that the cost model does not price (e.g. 'fp8 row-wise scaling'): the run is "
        "compared with its prediction but left out of the calibration fit, with this reason.",
    )

    def unmodelled_reason(self, planned_framework: str | None) -> str:
        """Why this run cannot calibrate a model priced for `planned_framework` ('' when it can; None: the planner
        chose): knobs the user named, or a run of another framework than the plan priced."""
        reasons = [k.strip() for k in self.unmodelled if k.strip()]
        fw = self.framework or "other"
        ran = SAME_STACK.get(fw, fw)
        if planned_framework is not None and ran not in ("other", planned_framework):
            reasons.append(f"ran on {self.framework}, the plan priced {planned_framework}")
        return "; ".join(reasons)

    def with_release(self, workload: TrainingWorkload) -> TrainingWorkload:
        """The workload as this run ran it: with the run's framework_version where the plan's workload states none,
        the run is of the plan's (named) framework and the version is a release number (frameworks/releases.py);
        a calibration then sees the run's stack (its novelty widens the compute prior, calibration/fit.py)."""
        version = self.framework_version.strip()
        fw = SAME_STACK.get(self.framework or "other", self.framework or "other")
        if (
            not version
            or workload.framework_version is not None
            or workload.framework == "auto"
            or fw not in ("other", workload.framework)
            or RELEASE_PATTERN.match(version) is None
        ):
            return workload
        return workload.model_copy(update={"framework_version": version})

    @model_validator(mode="after")
    def _check(self) -> Measurement:
        if all(
            v is None
            for v in (
                self.step_time_s,
                self.tokens_per_s,
                self.peak_allocated_gb,
                self.peak_reserved_gb,
                self.ttft_s,
                self.tpot_s,
            )
        ):
            raise DomainError(
                "measurement",
                "needs at least one of step_time_s, tokens_per_s, peak_allocated_gb, peak_reserved_gb, ttft_s, tpot_s",
            )
        if (
            self.peak_reserved_gb is not None
            and self.peak_allocated_gb is not None
            and self.peak_reserved_gb < self.peak_allocated_gb
        ):
            raise DomainError(
                "measurement.peak_reserved_gb", "must be at least peak_allocated_gb (reserved includes allocated)"
            )
        if self.phases_s is not None and any(not (0 <= t <= MAX_STEP_S) for t in self.phases_s.values()):
            raise DomainError("measurement.phases_s", f"every phase time must be in [0, {MAX_STEP_S:g}] s")
        if self.stage_times_s is not None and any(not (0 < t <= MAX_STEP_S) for t in self.stage_times_s):
            raise DomainError("measurement.stage_times_s", f"every stage time must be in (0, {MAX_STEP_S:g}] s")
        return self

    def training_step_time(self, workload: TrainingWorkload | InferenceWorkload) -> float | None:
        """Seconds per step, from step_time_s or from tokens_per_s and the workload's tokens per step."""
        if self.step_time_s is not None:
            return self.step_time_s
        if self.tokens_per_s is not None and isinstance(workload, TrainingWorkload):
            return workload.tokens_per_step / self.tokens_per_s
        return None

    def check_against(self, workload: TrainingWorkload | InferenceWorkload, gpu_memory_gb: float) -> None:
        """Rules that need the run's workload and GPU: a training step time for training, memory within the GPU."""
        if isinstance(workload, TrainingWorkload):
            if self.ttft_s is not None or self.tpot_s is not None:
                raise DomainError("measurement.ttft_s", "is a serving figure; this plan is for training")
            if self.step_time_s is not None and self.tokens_per_s is not None:
                implied = workload.tokens_per_step / self.tokens_per_s
                if abs(implied - self.step_time_s) > 0.05 * self.step_time_s:
                    raise DomainError(
                        "measurement.tokens_per_s",
                        f"implies {implied:.4g} s per step, but step_time_s is {self.step_time_s:.4g} s "
                        "(give one, or both consistent within 5%)",
                    )
        elif self.step_time_s is not None:
            raise DomainError("measurement.step_time_s", "is a training figure; this plan is for serving")
        for name in ("peak_allocated_gb", "peak_reserved_gb"):
            v = getattr(self, name)
            if v is not None and v > gpu_memory_gb * 1.001:
                raise DomainError(
                    f"measurement.{name}", f"{v:.1f} GB is more than the GPU has ({gpu_memory_gb:.1f} GB)"
                )
