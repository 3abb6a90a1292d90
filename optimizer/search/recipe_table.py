"""Published expert layouts of the model presets (issue 53 §3): the recipes NVIDIA and Meta ran, each row citing
its source, keyed by preset, GPU, precision and sequence length at the cluster size it was published for. The
search prices every row that matches a request (optimizer/search/recipes.py), data parallelism scaled to the
cluster (the recipes' own rule: Megatron-Bridge derives DP from the GPU count, data_parallel_size = world /
(TP x PP x CP), megatron/core/parallel_state.py; Meta's Table 4 grows DP from 8,192 to 16,384 GPUs at fixed TP, PP).

Each row holds the knobs its source publishes; `open` names the knobs it leaves unsaid, which the pricing searches
(recompute over none / selective / full; vp over the search's values with the interleaved schedule), as
accuracy/bridge_rows.py prices the same tables. Megatron-Bridge performance defaults set what a row does not say
(scripts/performance and perf_recipes at Megatron-Bridge 067f987df): the distributed optimizer (zero 1), sequence
parallelism with userbuffers TP-comm overlap when tp > 1, expert TP 1, MoE dispatch through the flex dispatcher
(DeepEP / HybridEP) except where the recipe keeps the all-to-all. The same rows live, with their measured times, in
accuracy/data/published_runs.json (`record`) or accuracy/data/megatron_bridge_summary.csv (container, system);
tests/optimizer/search/test_recipes.py checks each row against them.

No Mixtral row: no Mixtral 8x7B training recipe is among the sources the project cites (published_runs.json, the
Megatron-Bridge summary CSV), and a row without a citation is not admitted.
"""

from __future__ import annotations

from dataclasses import dataclass, field

BRIDGE_URL = "https://github.com/NVIDIA-NeMo/Megatron-Bridge/blob/067f987df03b8355b03192d88d70f1709fedf51a/docs/"


@dataclass(frozen=True, slots=True)
class Recipe:
    """One published layout at the scale it was published."""

    id: str
    model: str
    """The model preset (optimizer/spec/presets/models)."""
    gpu: str
    """The GPU catalog name (optimizer/spec/gpu_catalog.py)."""
    gpus: int
    precision: str
    """GEMM precision as the workload names it (MXFP8 / FP8-CS rows are fp8)."""
    seq_len: int
    config: dict[str, object]
    """ParallelConfig fields as published (dp is derived from the cluster)."""
    source: str
    open: tuple[str, ...] = field(default=())
    """Knobs the source leaves unsaid: "recompute", "vp"."""
    record: str | None = None
    """The record in accuracy/data/published_runs.json, or the CSV row "container/system" of the Bridge summary."""


# The 70B FP8 recipe's pipeline_model_parallel_layout (40 virtual stages; per rank 10, 10, 10, 11, 10, 10, 10, 9),
# as record megatron_bridge_h100_llama3_70b_fp8_64gpu gives it.
LLAMA3_70B_LAYOUT = "Et*2|(t*2|)*34,t*3|(t*2|)*3,tL"
_MOE_DEFAULTS: dict[str, object] = {"etp": 1, "ep_dispatch": "deepep"}


def _tp(tp: int, **rest: object) -> dict[str, object]:
    """Megatron-Bridge's defaults for a tp degree: sequence parallel and TP-comm overlap when tp > 1."""
    return {"tp": tp, "sequence_parallel": tp > 1, "tp_comm_overlap": tp > 1, "zero_stage": 1, **rest}


RECIPES: tuple[Recipe, ...] = (
    Recipe(
        "bridge2509-h100-deepseek-v3-fp8-1024",
        "deepseek-v3",
        "H100-SXM-80GB",
        1024,
        "fp8",
        4096,
        {
            **_tp(2, tp_comm_overlap=False),
            "pp": 8,
            "vp": 4,
            "ep": 64,
            "etp": 1,
            "mbs": 1,
            "pipeline_layout": "Et|(tt|)*30mL",
            "ep_comm_overlap": True,
            "ep_dispatch": "deepep",
            "overlap_grad_reduce": False,
            "recompute": "selective",
            "recompute_modules": ("mla_up_proj", "mlp"),
        },
        "NVIDIA Megatron-Bridge 25.09 performance summary (archive), DeepSeekV3 on 1,024 DGX-H100 FP8: TP 2, PP 8, "
        "VP 4, EP 64, layout Et|(tt|)*30mL, DeepEP, A2A overlap, recompute mla_up_proj + mlp; "
        + BRIDGE_URL
        + "performance-summary-archive.md",
        record="megatron_bridge2509_h100_deepseek_v3_fp8_1024gpu",
    ),
    Recipe(
        "bridge2606-h100-llama31-405b-fp8-1024",
        "llama-3.1-405b",
        "H100-SXM-80GB",
        1024,
        "fp8",
        8192,
        {**_tp(8), "pp": 8, "cp": 2, "vp": 8, "mbs": 1, "recompute": "none", "layers_per_stage": [15, *[16] * 6, 15]},
        "NVIDIA Megatron-Bridge 26.06 performance summary, LLAMA3.1_405B on 1,024 DGX-H100 FP8 (recipe "
        "llama31_405b_pretrain_1024gpu_h100_fp8cs_config): TP 8, PP 8, CP 2, VP 8, embedding and loss in the "
        "pipeline split; " + BRIDGE_URL + "performance-summary.md",
        record="megatron_bridge_h100_llama31_405b_fp8_1024gpu",
    ),
    Recipe(
        "meta-llama3-405b-16384",
        "llama-3.1-405b",
        "H100-SXM-80GB",
        16384,
        "bf16",
        8192,
        {**_tp(8), "pp": 16, "cp": 1, "mbs": 1, "schedule": "interleaved-1f1b", "layers_per_stage": [7, *[8] * 14, 7]},
        "Llama Team (Dubey et al.) 2024, The Llama 3 Herd of Models, Table 4: 405B on 16,384 H100, TP 8, CP 1, PP 16, "
        "DP 128, interleaved schedule, one layer fewer on the first and last stage (Sec. 3.3.2); "
        "https://arxiv.org/abs/2407.21783",
        open=("recompute", "vp"),
        record="dubey2024_llama3_405b_16384_cp1",
    ),
    Recipe(
        "bridge-h100-llama3-70b-fp8-64",
        "llama-3-70b",
        "H100-SXM-80GB",
        64,
        "fp8",
        8192,
        {
            **_tp(4),
            "pp": 8,
            "vp": 5,
            "mbs": 1,
            "recompute": "none",
            "pipeline_layout": "Et*2|(t*2|)*34,t*3|(t*2|)*3,tL",
        },
        "NVIDIA Megatron-Bridge 26.04.01 performance summary, LLAMA3_70B on 64 DGX-H100 FP8 (recipe "
        "llama3_70b_pretrain_64gpu_h100_fp8cs_config): TP 4, PP 8, VP 5; " + BRIDGE_URL + "performance-summary.md",
        record="megatron_bridge_h100_llama3_70b_fp8_64gpu",
    ),
    Recipe(
        "bridge-h100-llama3-70b-bf16-64",
        "llama-3-70b",
        "H100-SXM-80GB",
        64,
        "bf16",
        8192,
        {**_tp(4), "pp": 4, "cp": 2, "vp": 5, "mbs": 1},
        "NVIDIA Megatron-Bridge perf_recipes/llama/h100/llama3.py llama3_70b_pretrain_64gpu_h100_bf16_config: TP 4, "
        "PP 4, CP 2, VP 5, sequence parallel, userbuffers TP overlap (accuracy/plan_quality.py scenario "
        "'Llama-3-70B, 64 H100')",
        open=("recompute",),
    ),
    Recipe(
        "nemo2412-h100-llama3-8b-fp8-8",
        "llama-3-8b",
        "H100-SXM-80GB",
        8,
        "fp8",
        8192,
        {**_tp(1), "pp": 1, "cp": 2, "mbs": 1},
        "NVIDIA NeMo Framework 24.12 performance summary, LLAMA3-8B on 8 DGX-H100 FP8: TP 1, PP 1, CP 2, VP 1; "
        "https://docs.nvidia.com/nemo-framework/user-guide/24.12/nemotoolkit/performance/performance_summary.html",
        open=("recompute",),
        record="nemo2412_h100_fp8_llama3_8b_8gpu",
    ),
    Recipe(
        "bridge2511-h100-llama3-8b-fp8-8",
        "llama-3-8b",
        "H100-SXM-80GB",
        8,
        "fp8",
        8192,
        {**_tp(1), "pp": 1, "mbs": 1, "zero_stage": 3},
        "NVIDIA Megatron-Bridge 25.11 performance summary (archive), LLAMA3_8B on 8 DGX-H100 FP8-CS: FSDP 8, TP 1, "
        "PP 1, CP 1; " + BRIDGE_URL + "performance-summary-archive.md",
        open=("recompute",),
        record="25.11/DGX-H100",
    ),
    Recipe(
        "bridge-h100-qwen3-235b-a22b-fp8-256",
        "qwen3-235b-a22b",
        "H100-SXM-80GB",
        256,
        "fp8",
        4096,
        {
            **_tp(2, tp_comm_overlap=False),
            "pp": 8,
            "vp": 4,
            "ep": 32,
            "etp": 1,
            "mbs": 1,
            "recompute": "none",
            "ep_comm_overlap": True,
            "layers_per_stage": [11, *[12] * 6, 11],
        },
        "NVIDIA Megatron-Bridge 26.04.01 performance summary, Qwen3_235B_a22B on 256 DGX-H100 FP8: TP 2, PP 8, VP 4, "
        "EP 32, expert TP 1, alltoall dispatcher with A2A overlap, no TP-comm overlap; "
        + BRIDGE_URL
        + "performance-summary.md",
        record="megatron_bridge_h100_qwen3_235b_a22b_fp8_256gpu",
    ),
    Recipe(
        "bridge-h100-qwen3-30b-a3b-fp8-16",
        "qwen3-30b-a3b",
        "H100-SXM-80GB",
        16,
        "fp8",
        4096,
        {**_tp(1), **_MOE_DEFAULTS, "pp": 1, "ep": 16, "mbs": 1, "recompute": "none"},
        "NVIDIA Megatron-Bridge 26.06 performance summary, Qwen3_30B_a3B on 16 DGX-H100 FP8: TP 1, PP 1, EP 16, "
        "HybridEP flex dispatcher; " + BRIDGE_URL + "performance-summary.md",
        record="megatron_bridge_h100_qwen3_30b_a3b_fp8_16gpu",
    ),
    Recipe(
        "bridge260401-b200-deepseek-v3-mxfp8-256",
        "deepseek-v3",
        "B200-180GB",
        256,
        "fp8",
        4096,
        {**_tp(1), **_MOE_DEFAULTS, "pp": 8, "vp": 2, "ep": 32, "mbs": 1},
        "NVIDIA Megatron-Bridge 26.04.01 performance summary (archive), DeepSeekV3 on 256 DGX-B200 MXFP8: TP 1, "
        "PP 8, VP 2, EP 32; " + BRIDGE_URL + "performance-summary-archive.md",
        open=("recompute",),
        record="26.04.01/DGX-B200",
    ),
    Recipe(
        "bridge2511-b200-llama3-8b-fp8-8",
        "llama-3-8b",
        "B200-180GB",
        8,
        "fp8",
        8192,
        {**_tp(1), "pp": 1, "mbs": 2},
        "NVIDIA Megatron-Bridge 25.11 performance summary (archive), LLAMA3_8B on 8 DGX-B200 FP8-CS: TP 1, PP 1, "
        "MBS 2; " + BRIDGE_URL + "performance-summary-archive.md",
        open=("recompute",),
        record="25.11/DGX-B200",
    ),
    Recipe(
        "bridge2511-b200-llama31-405b-fp8-128",
        "llama-3.1-405b",
        "B200-180GB",
        128,
        "fp8",
        8192,
        {**_tp(4), "pp": 8, "cp": 2, "vp": 8, "mbs": 1, "layers_per_stage": [15, *[16] * 6, 15]},
        "NVIDIA Megatron-Bridge 25.11 performance summary (archive), LLAMA3.1_405B on 128 DGX-B200 FP8-CS: TP 4, "
        "PP 8, CP 2, VP 8; " + BRIDGE_URL + "performance-summary-archive.md",
        open=("recompute",),
        record="25.11/DGX-B200",
    ),
    Recipe(
        "bridge260401-b200-qwen3-235b-a22b-mxfp8-256",
        "qwen3-235b-a22b",
        "B200-180GB",
        256,
        "fp8",
        4096,
        {**_tp(1), **_MOE_DEFAULTS, "pp": 8, "ep": 8, "mbs": 1},
        "NVIDIA Megatron-Bridge 26.04.01 performance summary (archive), Qwen3_235B_a22B on 256 DGX-B200 MXFP8: TP 1, "
        "PP 8, EP 8; " + BRIDGE_URL + "performance-summary-archive.md",
        open=("recompute",),
        record="26.04.01/DGX-B200",
    ),
    Recipe(
        "bridge260401-b200-qwen3-30b-a3b-mxfp8-8",
        "qwen3-30b-a3b",
        "B200-180GB",
        8,
        "fp8",
        4096,
        {**_tp(1), **_MOE_DEFAULTS, "pp": 1, "ep": 8, "mbs": 4},
        "NVIDIA Megatron-Bridge 26.04.01 performance summary (archive), Qwen3_30B_a3B on 8 DGX-B200 MXFP8: TP 1, "
        "PP 1, EP 8, MBS 4; " + BRIDGE_URL + "performance-summary-archive.md",
        open=("recompute",),
        record="26.04.01/DGX-B200",
    ),
)
