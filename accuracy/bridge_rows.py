"""Megatron-Bridge performance-summary rows priced by the cost model (accuracy/data/megatron_bridge_summary.csv: 160
pre-training rows, containers 25.09 to 26.08, DGX-H100 / B200 / GB200 / B300 / GB300). Nothing here is fitted: the
rows check the model across GPUs and software versions beyond the calibration set, and serve as clusters the
calibration has never seen (accuracy/blind_calibration.py).
Each row is priced with its published knobs (TP, PP, CP, VP, EP, micro-batch, global batch, FSDP) and Megatron-Bridge's
perf defaults for the rest: distributed optimizer, bf16 gradients, FP8 primary weights under FP8, sequence parallel
and TP-comm overlap when tp > 1, expert TP 1, embedding and loss counted in the pipeline split when the layers do not
divide. Not published per row and so searched as the planner does: recompute (none; selective, with the attention
core and, for MoE / MLA models, the output-discarding modules; full; the fastest that fits). The 26.06+
MXFP8 MoE recipes overlap the EP all-to-all and run full-iteration CUDA graphs (A2A_OVERLAP_FROM), the others
per-layer graphs at most, leaving the MoE experts eager; MoE rows dispatch hierarchically (HybridEP / DeepEP) except
where the recipe keeps the all-to-all (ALLTOALL_DISPATCH); the Megatron-FSDP recipes on NVL72 racks offload
activations (OFFLOAD_LAYERS). Not applied: the MoE recipes' paged stash. NVL72 racks are taken as 64-GPU NVLink
domains (16 trays per rack, as the recipes place 256-GPU jobs).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from importlib import resources

from optimizer.calibration.fit import FitPoint
from optimizer.costmodel.estimate import estimate
from optimizer.errors import DomainError
from optimizer.spec.cluster_loading import resolve_cluster
from optimizer.spec.cluster_spec import ClusterSpec
from optimizer.spec.model_loading import resolve_model
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.recompute_modules import searched_modules
from optimizer.spec.stage_layers import LayerRules
from optimizer.spec.workload import TrainingWorkload

DATA = "megatron_bridge_summary.csv"
NEWEST = ("26.06", "26.08")
# From 26.06 the MXFP8 MoE recipes run full-iteration CUDA graphs with the EP all-to-all overlapped
# (comm_overlap.overlap_moe_expert_parallel_comm = True in _enable_deepseek_full_iteration_mxfp8 and
# _enable_hybridep_full_iteration_mxfp8, src/megatron/bridge/perf_recipes/{deepseek,qwen}/common.py at 067f987;
# Qwen3 GB200 / GB300 since #4211, 2026-06-10). Megatron runs the overlap with pp 1 or an interleaved schedule.
A2A_OVERLAP_FROM = "26.06"
# The MoE recipes dispatch with Megatron's flex dispatcher (HybridEP; DeepEP for DeepSeek-V3 on H100 in 25.09:
# scripts/performance/run_script.py enable_deepep for h100 at fa0315ae2) except Qwen3-235B on H100, which keeps
# the all-to-all (moe_token_dispatcher_type 'alltoall', perf_recipes/qwen/h100/qwen3_moe.py at 067f987;
# qwen3_workload_base_configs.py at 5f3b336f9). It matters only where EP leaves the NVLink domain.
ALLTOALL_DISPATCH = {("DGX-H100", "qwen3-235b-a22b")}
# Older recipes that overlap the EP all-to-all too, from this container on: Qwen3-235B on H100 (moe_a2a_overlap=True
# in QWEN3_235B_A22B_PRETRAIN_CONFIG_H100_*_V1, scripts/performance/configs/qwen/qwen3_workload_base_configs.py at
# c4cc63bac, 2026-02-13, and 5f3b336f9).
A2A_OVERLAP_RECIPES: dict[tuple[str, str], str] = {("DGX-H100", "qwen3-235b-a22b"): "26.02"}
# Megatron-FSDP rows that offload activations of this many layers (Megatron --cpu-offloading-num-layers), the same
# from 25.09 to 26.04: Llama 3 70B FP8 on GB200 40, on GB300 20 (scripts/performance/configs/llama3/
# llama3_70b_llm_pretrain.yaml at fbca5764f, workload_base_configs.py at 06a9d1d94, llama3_workload_base_configs.py
# at 39d02fe7f); Llama 3.1 405B FP8 tp2 FSDP on GB200 95 (configs/llama31/llama31_405b_llm_pretrain.yaml, fbca5764f).
OFFLOAD_LAYERS: dict[tuple[str, str], int] = {
    ("DGX-GB200", "llama-3-70b"): 40,
    ("DGX-GB300", "llama-3-70b"): 20,
    ("DGX-GB200", "llama-3.1-405b"): 95,
}

# System -> (cluster preset, GPUs per node): the presets carry the GPU, NVLink and NICs (spec/presets/clusters;
# NVL72 racks as 16 trays of 4 GPUs, one NIC per GPU).
SYSTEMS: dict[str, tuple[str, int]] = {
    "DGX-H100": ("dgx-h100", 8),
    "DGX-B200": ("dgx-b200", 8),
    "DGX-B300": ("dgx-b300", 8),
    "DGX-GB200": ("gb200-nvl72", 4),
    "DGX-GB300": ("gb300-nvl72", 4),
}


@dataclass(frozen=True, slots=True)
class Row:
    """One published row and what the model predicts for it."""

    container: str
    system: str
    label: str
    measured_s: float
    predicted_s: float | None
    note: str
    point: FitPoint | None = None  # the priced run (the fastest configuration that fits), for calibration

    @property
    def error(self) -> float | None:
        return None if self.predicted_s is None else self.predicted_s / self.measured_s - 1


def _cluster(system: str, gpus: int) -> ClusterSpec:
    preset, per_node = SYSTEMS[system]
    return resolve_cluster(f"{preset}:{max(1, gpus // per_node)}")


def price(rec: dict[str, str]) -> Row:
    """The fastest configuration with the row's published knobs that fits (recompute searched)."""
    gpus, tp, pp, cp, vp, ep = (int(rec[k]) for k in ("gpus", "tp", "pp", "cp", "vp", "ep"))
    gbs, mbs, seq = int(rec["gbs"]), int(rec["mbs"]), int(rec["seq_len"])
    fp8 = "FP8" in rec["precision"].upper()
    model = resolve_model(rec["preset"])
    if int(rec["mtp_layers"]):
        model = model.model_copy(update={"mtp_layers": int(rec["mtp_layers"])})
    measured = gbs * seq / (float(rec["tokens_per_s_per_gpu"]) * gpus)
    label = f"{rec['model']} {gpus} {rec['precision']} tp{tp} pp{pp} cp{cp} vp{vp} ep{ep} mbs{mbs}" + (
        " fsdp" if int(rec["fsdp"]) else ""
    )
    w = TrainingWorkload(
        global_batch_size=gbs,
        seq_len=seq,
        precision="fp8" if fp8 else "bf16",
        grad_dtype="bf16",
        fp8_param_gather=fp8,
        framework_version=rec["container"],
    )
    try:
        cluster = _cluster(rec["system"], gpus)
    except DomainError as exc:  # a GPU the catalog lacks
        return Row(rec["container"], rec["system"], label, measured, None, f"{exc.field}: {exc.rule}"[:80])
    full_iteration = ep > 1 and rec["precision"] == "MXFP8" and rec["container"] >= A2A_OVERLAP_FROM
    overlap_from = A2A_OVERLAP_RECIPES.get((rec["system"], rec["preset"]))
    recipe_overlap = full_iteration or (overlap_from is not None and rec["container"] >= overlap_from)
    a2a_overlap = ep > 1 and recipe_overlap and (pp == 1 or vp > 1)
    w = w.model_copy(update={"cuda_graphs": "full_iteration" if full_iteration else "layers"})
    dispatch = "alltoall" if ep == 1 or (rec["system"], rec["preset"]) in ALLTOALL_DISPATCH else "deepep"
    offload = OFFLOAD_LAYERS.get((rec["system"], rec["preset"]), 0) if int(rec["fsdp"]) else 0
    split = None
    if model.num_layers % pp or (model.num_layers // pp) % vp or model.mtp_layers:
        split = LayerRules.of(model, pp, vp, True).default_split()
    best: float | None = None
    point: FitPoint | None = None
    reason = ""
    # The planner's recompute choices: none, selective (the attention core; and for MoE / MLA models the
    # output-discarding module set it searches, recompute_modules.searched_modules), full.
    mods = searched_modules(model)
    recomputes: list[tuple[str, list[str] | None]] = [("none", None), ("selective", None)]
    recomputes += [("selective", list(mods))] if mods else []
    recomputes.append(("full", None))
    # The recipe's A2A overlap first; where nothing fits with it (its paged expert-activation stash, which spills to
    # host memory, is not modelled, and Megatron's overlap refuses full recompute), the row is priced without it.
    for overlap in (True, False) if a2a_overlap else (False,):
        for recompute, modules in recomputes:
            try:
                cfg = ParallelConfig(
                    tp=tp,
                    pp=pp,
                    dp=gpus // (tp * pp * cp),
                    cp=cp,
                    ep=ep,
                    ep_comm_overlap=overlap,
                    ep_dispatch=dispatch,
                    etp=1 if ep > 1 else None,
                    vp=vp,
                    mbs=mbs,
                    schedule="interleaved-1f1b" if vp > 1 else "1f1b",
                    sequence_parallel=tp > 1,
                    tp_comm_overlap=tp > 1,
                    recompute=recompute,
                    recompute_modules=modules,
                    zero_stage=3 if int(rec["fsdp"]) else 1,
                    layers_per_stage=split,
                    offload_layers=offload,
                )
                e = estimate(model, cluster, w, cfg, goodput_band=False)
            except (DomainError, ValueError) as exc:
                reason = reason or str(exc)
                continue
            if e.feasible and (best is None or e.step_time_s < best):
                best = e.step_time_s
                point = FitPoint(label, model, cluster, w, cfg, step_time_s=measured)
            reason = reason or (e.reason or "")
        if best is not None:
            break
    return Row(rec["container"], rec["system"], label, measured, best, "" if best else reason[:80], point)


def bridge_rows() -> list[dict[str, str]]:
    text = (resources.files("accuracy") / "data" / DATA).read_text()
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    return list(csv.DictReader(lines))


# Two rows whose measured times differ by less than this are a tie, not a pair to order.
PAIR_TIE = 0.03


def priced_rows() -> list[tuple[dict[str, str], Row]]:
    """Every published row with its prediction."""
    return [(rec, price(rec)) for rec in bridge_rows()]


def same_setup_pairs(priced: list[tuple[dict[str, str], Row]]) -> list[tuple[dict[str, str], Row, Row]]:
    """(a row of the pair's group, a, b) for every pair of priced rows of one container, model, GPU count, batch and
    sequence length (other GPUs, precisions or layouts): issue 12's comparison pairs, ties included."""
    groups: dict[tuple[str, ...], list[tuple[dict[str, str], Row]]] = {}
    for rec, r in priced:
        if r.predicted_s is not None:
            key = (rec["container"], rec["model"], rec["gpus"], rec["gbs"], rec["seq_len"])
            groups.setdefault(key, []).append((rec, r))
    return [
        (rec, a, b) for members in groups.values() for i, (rec, a) in enumerate(members) for _, b in members[i + 1 :]
    ]


def ordered_pairs(priced: list[tuple[dict[str, str], Row]]) -> tuple[int, int]:
    """(pairs ordered as measured, pairs) among the same-setup pairs: the faster one measured must be predicted
    faster. Ties (measured within PAIR_TIE) are left out."""
    ok = total = 0
    for _, a, b in same_setup_pairs(priced):
        if abs(a.measured_s / b.measured_s - 1) < PAIR_TIE:
            continue
        assert a.predicted_s is not None and b.predicted_s is not None
        total += 1
        ok += (a.measured_s < b.measured_s) == (a.predicted_s < b.predicted_s)
    return ok, total
