"""What each training framework can run, and how it communicates: the one table the search, the validation, the
cost model and the exports read.

Every entry cites the framework's own code or documentation (argument or config name, and the snapshot read:
Megatron-LM d98e8a6 of 2026-08-22, DeepSpeed edaa722 of 2026-08-22, torchtitan b5bcd76 of 2026-08-21).

Vocabulary. `zero_stage` is the planner's name for how data-parallel ranks shard the training state:
0 replicated (DDP), 1 optimizer state sharded (Megatron's distributed optimizer, DeepSpeed ZeRO-1, and FSDP under
pipeline parallelism, which gathers once per step and keeps the stage's parameters and gradients whole until the
last micro-batch), 2 gradients too (DeepSpeed ZeRO-2, FSDP `reshard_after_forward=False`), 3 parameters too
(DeepSpeed ZeRO-3, FSDP full shard, Megatron-FSDP `optim_grads_params`). `shard_group` (ParallelConfig) shards
those states over fewer ranks than the data-parallel group, replicated across the groups (HSDP, MiCS, Megatron
distributed-optimizer instances), or, with shard_scope 'weights', adds DeepSpeed ZeRO++'s secondary weight
partition (hpZ).
"""

from __future__ import annotations

from optimizer.errors import DomainError, UnknownNameError
from optimizer.frameworks.framework_specs import DEEPSPEED, MEGATRON, TORCHTITAN, Framework
from optimizer.frameworks.releases import parse_version
from optimizer.spec.gpu_catalog import GPUSpec, has_transformer_engine
from optimizer.spec.model_spec import ModelSpec
from optimizer.spec.names import FRAMEWORKS
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import TrainingWorkload

# The frameworks themselves are data in framework_specs.py; callers keep importing them from here.
__all__ = [
    "DEEPSPEED",
    "DEEPSPEED_CHECKED_RELEASE",
    "FRAMEWORK_TABLE",
    "MEGATRON",
    "MICS_LAST_RELEASE",
    "TORCHTITAN",
    "Framework",
    "allows",
    "check_config",
    "check_model",
    "check_workload",
    "deepspeed_release",
    "expert_tp_values",
    "framework",
    "runs_expert_tp",
    "runs_shard_group",
    "runs_tp_comm_overlap",
    "searched_zero_stages",
    "unsupported_knob",
]


FRAMEWORK_TABLE: dict[str, Framework] = {f.name: f for f in (MEGATRON, DEEPSPEED, TORCHTITAN)}


def framework(name: str) -> Framework:
    """The framework called `name`; an unknown name lists the known ones."""
    try:
        return FRAMEWORK_TABLE[name]
    except KeyError:
        raise UnknownNameError("workload.framework", name, FRAMEWORKS) from None


def unsupported_knob(fw: Framework, c: ParallelConfig) -> tuple[str, str] | None:
    """The first knob of `c` that `fw` cannot run, as (knob, 'knob=value'), or None."""
    checks: tuple[tuple[bool, str, str], ...] = (
        (c.schedule not in fw.schedules, "schedule", f"schedule={c.schedule}"),
        (c.vp > 1 and not fw.virtual_stages, "vp", f"vp={c.vp}"),
        (
            c.vp > 1 and not fw.virtual_stage_layout and any(n % c.vp for n in c.layers_per_stage or ()),
            "vp",
            f"vp={c.vp} with layers_per_stage={c.layers_per_stage} (virtual stages of unequal size)",
        ),
        (c.cp > 1 and not fw.context_parallel, "cp", f"cp={c.cp}"),
        (c.cp > 1 and c.cp_comm not in fw.cp_comms, "cp_comm", f"cp_comm={c.cp_comm}"),
        (c.ep > 1 and not fw.expert_parallel, "ep", f"ep={c.ep}"),
        (c.etp is not None and not runs_expert_tp(fw, c.tp, c.ep, c.etp), "etp", f"etp={c.etp}"),
        (c.tp_comm_overlap and not fw.tp_comm_overlap, "tp_comm_overlap", "tp_comm_overlap=true"),
        (c.ep_comm_overlap and not fw.ep_comm_overlap, "ep_comm_overlap", "ep_comm_overlap=true"),
        (c.ep_dispatch not in fw.ep_dispatches, "ep_dispatch", f"ep_dispatch={c.ep_dispatch}"),
        (c.sequence_parallel and not fw.sequence_parallel, "sp", "sp=true"),
        (c.recompute not in fw.recomputes, "recompute", f"recompute={c.recompute}"),
        (c.offload_layers > 0 and not fw.activation_offload, "offload_layers", f"offload_layers={c.offload_layers}"),
        (
            c.recompute_modules is not None and not fw.recompute_modules,
            "recompute_modules",
            f"recompute_modules={','.join(c.recompute_modules or ())}",
        ),
        (
            c.zero_stage not in (fw.zero_stages_with_pp if c.pp > 1 else fw.zero_stages),
            "zero",
            f"zero={c.zero_stage}" + (f" with pp={c.pp}" if c.pp > 1 else ""),
        ),
        (
            fw.ddp_alone and c.zero_stage == 0 and (c.cp > 1 or (c.dp > 1 and max(c.tp, c.pp, c.ep) > 1)),
            "zero",
            f"zero=0 (DDP) with dp={c.dp}, tp={c.tp}, pp={c.pp}, cp={c.cp}, ep={c.ep}",
        ),
        *_shard_group_checks(fw, c),
    )
    for bad, knob, text in checks:
        if bad:
            return knob, text
    return None


def _shard_group_checks(fw: Framework, c: ParallelConfig) -> tuple[tuple[bool, str, str], ...]:
    """unsupported_knob's rows for a shard group: the scope, the ZeRO stage, the model-parallel degrees."""
    if c.shard_group is None:
        return ()
    text = f"shard_group={c.shard_group}"
    weights = c.shard_scope == "weights"
    return (
        (weights and not fw.shard_group_weights, "shard_scope", "shard_scope=weights"),
        (
            not weights and c.zero_stage not in fw.shard_group_stages,
            "shard_group",
            f"{text} with zero={c.zero_stage}",
        ),
        (
            not fw.shard_group_model_parallel and max(c.tp, c.pp, c.ep) > 1,
            "shard_scope" if weights else "shard_group",
            f"{text} with tp={c.tp}, pp={c.pp}, ep={c.ep}",
        ),
    )


# The DeepSpeed release a plan that names none runs: the newest, which the export is checked against
# (tests/frameworks/deepspeed/requirements.txt).
DEEPSPEED_CHECKED_RELEASE = "0.19.8"
# MiCS (zero_optimization.mics_shard_size) is in DeepSpeed up to 0.19.6; 0.19.7 refuses the key
# (deepspeed/runtime/config.py _REMOVED_ZERO_CONFIG_KEYS: "MiCS ZeRO-3 sharding has been removed", issue 8489).
MICS_LAST_RELEASE = (0, 19, 6)


def deepspeed_release(w: TrainingWorkload) -> str:
    """The DeepSpeed release a workload runs: its framework_version when it names DeepSpeed, else the checked one."""
    if w.framework == "deepspeed" and w.framework_version is not None:
        return w.framework_version
    return DEEPSPEED_CHECKED_RELEASE


def runs_shard_group(
    fw: Framework, zero_stage: int, scope: str, model_parallel: bool, deepspeed: str = DEEPSPEED_CHECKED_RELEASE
) -> bool:
    """Whether `fw` runs a shard group of `scope` at `zero_stage` (with tp, pp or ep > 1 when `model_parallel`);
    DeepSpeed's state shard groups (MiCS) only in a release that has them (`deepspeed`, the release planned for)."""
    if model_parallel and not fw.shard_group_model_parallel:
        return False
    if scope == "weights":
        return fw.shard_group_weights and zero_stage == 3
    if fw.name == "deepspeed" and parse_version(deepspeed) > MICS_LAST_RELEASE:
        return False
    return zero_stage in fw.shard_group_stages


def expert_tp_values(fw: Framework, tp: int, ep: int) -> tuple[int, ...]:
    """Expert tensor-parallel degrees worth trying with tp and ep: tp, and 1 where the framework runs it and
    ep >= tp (an etp below tp with fewer EP ranks than TP ranks replicates whole experts over the TP ranks).
    A pin reaches any etp the framework runs (runs_expert_tp)."""
    if fw.expert_tensor_parallel == "tp" or ep == 1:
        return (tp,)
    if fw.expert_tensor_parallel == "one_with_ep":
        return (1,)
    return (tp, 1) if 1 < tp <= ep else (tp,)


def runs_expert_tp(fw: Framework, tp: int, ep: int, etp: int) -> bool:
    """Whether `fw` runs experts with tensor-parallel degree `etp` next to tp and ep."""
    return fw.expert_tensor_parallel == "any" or etp in expert_tp_values(fw, tp, ep)


def check_config(fw: Framework, c: ParallelConfig, field: str = "config") -> None:
    """Raise a DomainError naming the knob when `fw` cannot run `c`."""
    bad = unsupported_knob(fw, c)
    if bad is not None:
        knob, text = bad
        raise DomainError(f"{field}.{knob}", f"{text} is not available in {fw.name} ({fw.source(knob)})")


def check_model(fw: Framework, model: ModelSpec, field: str = "model") -> None:
    """Raise a DomainError naming the model's knob when `fw` cannot train it."""
    if model.mtp_layers and not fw.mtp:
        raise DomainError(
            f"{field}.mtp_layers",
            f"mtp_layers={model.mtp_layers} is not available in {fw.name} ({fw.source('mtp')})",
        )


def check_workload(fw: Framework, w: TrainingWorkload, field: str = "workload") -> None:
    """Raise a DomainError naming the workload's knob when `fw` cannot run it."""
    if w.precision not in fw.precisions:
        raise DomainError(
            f"{field}.precision", f"precision={w.precision} is not available in {fw.name} ({fw.source('precision')})"
        )
    if w.grad_dtype not in fw.grad_dtypes:
        raise DomainError(
            f"{field}.grad_dtype",
            f"grad_dtype={w.grad_dtype} is not available in {fw.name} ({fw.source('grad_dtype')})",
        )
    for knob in ("fp8_param_gather", "precision_aware_optimizer"):
        if getattr(w, knob) and not getattr(fw, knob):
            raise DomainError(f"{field}.{knob}", f"{knob} is not available in {fw.name} ({fw.source(knob)})")


def searched_zero_stages(fw: Framework, pipelined: bool, tp: int, cp: int, ep: int) -> tuple[int, ...]:
    """The ZeRO stages the search tries for a layer key: plain DDP only where the framework runs it beside the
    key's tp, cp and ep (Framework.ddp_alone; dp = 1 gains nothing from it either)."""
    stages = fw.zero_stages_with_pp if pipelined else fw.zero_stages
    if fw.ddp_alone and max(tp, cp, ep) > 1:
        return tuple(z for z in stages if z > 0)
    return stages


def allows(fw: Framework, knob: str, value: object) -> bool:
    """Whether `fw` can run `knob=value` in some configuration (the search's domain filter)."""
    if knob == "schedule":
        return value in fw.schedules
    if knob == "zero":
        return value in fw.zero_stages or value in fw.zero_stages_with_pp
    if knob == "recompute":
        return value in fw.recomputes
    if knob == "recompute_modules":
        return fw.recompute_modules
    if knob == "cp_comm":
        return value in fw.cp_comms
    if knob == "shard_scope":
        return value == "states" or fw.shard_group_weights
    flags = {"cp": fw.context_parallel, "ep": fw.expert_parallel, "vp": fw.virtual_stages}
    if knob in flags:
        return flags[knob] or value == 1
    if knob == "offload_layers":
        return fw.activation_offload or value == 0
    if knob == "tp_comm_overlap":
        return fw.tp_comm_overlap or value is False
    if knob == "ep_comm_overlap":
        return fw.ep_comm_overlap or value is False
    if knob == "ep_dispatch":
        return value in fw.ep_dispatches
    if knob == "sp":
        return fw.sequence_parallel or value is False
    return True


def runs_tp_comm_overlap(fw: Framework, gpu: GPUSpec) -> bool:
    """Whether the framework overlaps TP communication on this GPU: Megatron's overlap is Transformer Engine's
    (--tp-comm-overlap, userbuffers), which Volta and Turing cannot run (gpu_catalog.has_transformer_engine)."""
    return fw.tp_comm_overlap and (fw.name != "megatron" or has_transformer_engine(gpu))
