"""Canonical public scenarios for checking the planner's picks (not only `estimate`): each names the published
configuration experts ran and the published MFU ceiling for its GPU family and precision; the serving ones name
the deployment and its published throughput. Used by
tests/optimizer/frameworks/test_frameworks.py and benchmarks/plan_quality.py."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from accuracy.published_runs import Record, load_records
from optimizer.spec.cluster_loading import resolve_cluster
from optimizer.spec.gpu_catalog import resolve_gpu
from optimizer.spec.model_loading import resolve_model
from optimizer.spec.model_spec import ModelSpec
from optimizer.spec.workload import TrainingWorkload


@dataclass(frozen=True, slots=True)
class Scenario:
    """A well-known public training scenario."""

    name: str
    model: str
    cluster: str
    gbs: int
    seq_len: int
    published: dict[str, int | str | bool] | None
    """The configuration its authors ran (None when only the scale is public)."""
    published_record: str | None
    """The record in accuracy/data/published_runs.json with its measured time, when there is one."""
    precision: Literal["bf16", "fp8"] = "bf16"
    """The GEMM precision of the published run."""
    mtp_layers: int = 0
    """Multi-token prediction modules the published run trained (on top of the preset)."""
    grad_dtype: Literal["fp32", "bf16"] = "fp32"
    """The dtype gradients were accumulated and reduced in (Megatron --grad-reduce-in-bf16)."""
    fp8_param_gather: bool = False
    """FP8 primary weights (Megatron --fp8-param-gather), as Megatron-Bridge's FP8 recipes run."""
    attention_kernel: Literal["fa3", "fa2"] | None = None
    """The fused-attention kernel generation of the published run's stack (None: the framework's default)."""

    @property
    def family(self) -> str:
        """The GPU family whose published MFU bounds the pick: the catalog name's first part (H800 is H100 silicon
        with less NVLink, so H100's records bound it)."""
        pool = resolve_cluster(self.cluster).pools[0]
        name = pool.gpu.split("-")[0].upper()
        return {"H800": "H100"}.get(name, name)

    def model_spec(self) -> ModelSpec:
        """The preset model with the run's MTP modules."""
        model = resolve_model(self.model)
        return model.model_copy(update={"mtp_layers": self.mtp_layers}) if self.mtp_layers else model

    def workload(self, framework: str = "megatron") -> TrainingWorkload:
        """The scenario's training workload."""
        return TrainingWorkload(
            global_batch_size=self.gbs,
            seq_len=self.seq_len,
            precision=self.precision,
            framework=framework,
            grad_dtype=self.grad_dtype,
            fp8_param_gather=self.fp8_param_gather and framework in ("megatron", "auto"),
            attention_kernel=self.attention_kernel,
        )


SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "GPT-3 175B, 128 x DGX-A100",
        "gpt-3-175b",
        "dgx-a100:128",
        1536,
        2048,
        {"tp": 8, "pp": 12, "dp": 8, "mbs": 1, "vp": 4, "recompute": "full"},
        "narayanan2021_t2_ptdp_175B_768",
    ),
    Scenario(
        "BLOOM-176B, 48 x DGX-A100",
        "bloom-176b",
        "dgx-a100:48",
        2048,
        2048,
        {"tp": 4, "pp": 12, "dp": 8, "mbs": 2, "recompute": "full"},
        None,
    ),
    Scenario(
        "530B, 280 x DGX-A100",
        "mt-nlg-530b",
        "dgx-a100:280",
        1920,
        2048,
        {"tp": 8, "pp": 35, "dp": 8, "mbs": 1, "recompute": "full"},
        "smith2022_mtnlg_2240",
    ),
    # NVIDIA's layout at this scale and batch (NeMo 24.12 performance summary, GPT3-175B on 512 H100, gbs 2048:
    # TP 4, PP 8, VP 6), run there in FP8 with mbs 2 (record nemo2412_h100_fp8_gpt3_175b_512gpu), so no BF16 time;
    # BF16 activations at mbs 2 do not fit without recompute, so the layout is compared at mbs 1.
    Scenario(
        "GPT-3 175B, 64 x DGX-H100",
        "gpt-3-175b",
        "dgx-h100:64",
        2048,
        2048,
        {"tp": 4, "pp": 8, "dp": 16, "vp": 6, "mbs": 1},
        None,
    ),
    Scenario(
        "Llama-3.1-405B, 16,384 H100",
        "llama-3.1-405b",
        "dgx-h100:2048",
        2048,
        8192,
        {"tp": 8, "pp": 16, "dp": 128, "mbs": 1},
        None,
    ),
    # NVIDIA's BF16 recipe for this model on 64 H100 (Megatron-Bridge perf_recipes/llama/h100/llama3.py,
    # llama3_70b_pretrain_64gpu_h100_bf16_config: TP 4, PP 4, CP 2, VP 5, sequence parallel, userbuffers TP
    # overlap; run there at gbs 256, no BF16 H100 throughput published). The same scenario measured on PyTorch
    # FSDP2 is the record nemo_automodel_h100_llama3_70b_fsdp2_cp2 (18.9 s per step, torchtitan in the model).
    Scenario(
        "Llama-3-70B, 64 H100",
        "llama-3-70b",
        "dgx-h100:8",
        128,
        8192,
        {"tp": 4, "pp": 4, "dp": 2, "cp": 2, "vp": 5, "mbs": 1},
        None,
    ),
    # DeepSeek ran tp 1, pp 16, ep 64 with DualPipe and node-limited per-node dispatch (priced: ep_dispatch deepep
    # and the model's 8 groups / 4 per token); DualPipe is not; the pick must still keep TP in the NVLink domain
    # and an MFU a run has reached (theirs: 19.9 s per step).
    Scenario(
        "DeepSeek-V3 FP8, 2,048 H800",
        "deepseek-v3",
        "hgx-h800:256",
        15360,
        4096,
        {"tp": 1, "pp": 16, "dp": 128, "ep": 64, "mbs": 1, "ep_dispatch": "deepep"},
        "deepseek2024_v3_pretrain_2048_h800",
        "fp8",
    ),
    # NVIDIA's FP8 recipe at this scale (Megatron-Bridge 25.09 performance summary, DeepSeekV3 on 1,024 DGX-H100:
    # TP 2, PP 8, VP 4, EP 64, expert TP 1, layout Et|(tt|)*30mL, A2A overlap, DeepEP dispatch; record
    # megatron_bridge2509_h100_deepseek_v3_fp8_1024gpu, 25.3 s per step; recompute of the MLA up-projections and
    # the MLP, gradients reduced in BF16). Megatron's MoE guide asks for EP x TP
    # inside the NVLink domain and PP across nodes (moe/README.md, guidelines 2-3); the recipe spreads EP over 8 nodes.
    Scenario(
        "DeepSeek-V3 FP8, 1,024 H100",
        "deepseek-v3",
        "dgx-h100:128",
        8192,
        4096,
        {
            "tp": 2,
            "pp": 8,
            "dp": 64,
            "ep": 64,
            "etp": 1,
            "vp": 4,
            "mbs": 1,
            "pipeline_layout": "Et|(tt|)*30mL",
            "ep_comm_overlap": True,
            "ep_dispatch": "deepep",
            "recompute": "selective",
            "recompute_modules": "mla_up_proj,mlp",
        },
        "megatron_bridge2509_h100_deepseek_v3_fp8_1024gpu",
        "fp8",
        mtp_layers=1,
        grad_dtype="bf16",
        fp8_param_gather=True,
    ),
    # NVIDIA's FP8 recipe (Megatron-Bridge performance summary, Qwen3_235B_a22B on 256 DGX-H100: TP 2, PP 8, VP 4,
    # EP 32 over 4 nodes with expert TP 1, alltoall dispatcher with A2A overlap, 94 layers as 11, 12 x 6, 11;
    # record megatron_bridge_h100_qwen3_235b_a22b_fp8_256gpu, 76.6 s per step).
    Scenario(
        "Qwen3-235B-A22B FP8, 256 H100",
        "qwen3-235b-a22b",
        "dgx-h100:32",
        8192,
        4096,
        {
            "tp": 2,
            "pp": 8,
            "dp": 16,
            "ep": 32,
            "etp": 1,
            "vp": 4,
            "mbs": 1,
            "recompute": "none",
            "ep_comm_overlap": True,
            "layers_per_stage": "11,12,12,12,12,12,12,11",
        },
        "megatron_bridge_h100_qwen3_235b_a22b_fp8_256gpu",
        "fp8",
        grad_dtype="bf16",
        fp8_param_gather=True,
    ),
    # NVIDIA's FP8 recipes on NVL72 racks (Megatron-Bridge perf_recipes/llama/gb200/llama31.py and
    # gb300/llama31.py, 26.06 container): GB200 TP 4, PP 16, VP 4; GB300 TP 4, PP 8, VP 4; mbs 1, no recompute,
    # embedding and loss counted in the pipeline split; records megatron_bridge2606_{gb200,gb300}_llama31_405b_fp8.
    Scenario(
        "Llama-3.1-405B FP8, 256 GB200",
        "llama-3.1-405b",
        "gb200-nvl72:64",
        1536,
        8192,
        {
            "tp": 4,
            "pp": 16,
            "dp": 4,
            "vp": 4,
            "mbs": 1,
            "recompute": "none",
            "layers_per_stage": "7" + ",8" * 14 + ",7",
        },
        "megatron_bridge2606_gb200_llama31_405b_fp8_256gpu",
        "fp8",
        grad_dtype="bf16",
        fp8_param_gather=True,
    ),
    Scenario(
        "Llama-3.1-405B FP8, 256 GB300",
        "llama-3.1-405b",
        "gb300-nvl72:64",
        1536,
        8192,
        {
            "tp": 4,
            "pp": 8,
            "dp": 8,
            "vp": 4,
            "mbs": 1,
            "recompute": "none",
            "layers_per_stage": "15" + ",16" * 6 + ",15",
        },
        "megatron_bridge2606_gb300_llama31_405b_fp8_256gpu",
        "fp8",
        grad_dtype="bf16",
        fp8_param_gather=True,
    ),
    # NeMo's long-sequence table: Llama 2 7B FP8, one 1M-token sequence per replica, 1,024 H100, TP 8 x CP 32 x DP 4
    # (NeMo 24.03, FlashAttention-2 class attention; record nemo2403_h100_long_sequence_llama2_7b_1024k_cp32).
    Scenario(
        "Llama-2-7B FP8, 1M tokens, 1,024 H100",
        "llama-2-7b",
        "dgx-h100:128",
        4,
        1048576,
        {"tp": 8, "pp": 1, "dp": 4, "cp": 32, "mbs": 1},
        "nemo2403_h100_long_sequence_llama2_7b_1024k_cp32",
        "fp8",
        grad_dtype="bf16",
        attention_kernel="fa2",
    ),
)


@dataclass(frozen=True, slots=True)
class ServingScenario:
    """A well-known public serving deployment, planned as an SLA fleet (objective max_rate on its GPUs)."""

    name: str
    model: str
    cluster: str
    workload: dict[str, object]
    """InferenceWorkload fields (lengths, engine, precision, targets)."""
    published: str
    """What its authors ran, in words."""
    published_rate: dict[str, float]
    """Their figures: output tokens/s per decode GPU node ('decode_node'), prompt tokens/s per prefill node
    ('prefill_node') or output tokens/s per GPU ('gpu')."""
    source: str


SERVING_SCENARIOS: tuple[ServingScenario, ...] = (
    ServingScenario(
        "DeepSeek-V3, 12 x 8 H100, SGLang",
        "deepseek-v3",
        "dgx-h100:12",
        {
            "prompt_len": 2000,
            "output_len": 1000,
            "ttft_ms": 5000,
            "tpot_ms": 100,
            "precision": "fp8",
            "engine": "sglang",
        },
        "PD disaggregation: prefill EP32 on 4 nodes, decode EP72 on 9 nodes, DP attention, two-batch overlap",
        {"decode_node": 22282, "prefill_node": 54543},
        "LMSYS blog 2025-05-05 large-scale EP (accuracy/data/serving_runs.json source lmsys_large_scale_ep_2025)",
    ),
    ServingScenario(
        "Llama 3.3 70B FP8, 1 x 8 H100, TensorRT-LLM, 1000/1000",
        "llama-3-70b",
        "dgx-h100",
        {"prompt_len": 1000, "output_len": 1000, "precision": "fp8", "kv_cache_dtype": "fp8", "engine": "trtllm"},
        "TP2 replicas (the perf-overview's H100 column for this model)",
        {"gpu": 4205 / 2},
        "TensorRT-LLM perf-overview.md (source trtllm_perf_overview_v1)",
    ),
    ServingScenario(
        "Llama 3.1 8B FP8, 1 x 8 H100, TensorRT-LLM, 1000/1000",
        "llama-3-8b",
        "dgx-h100",
        {"prompt_len": 1000, "output_len": 1000, "precision": "fp8", "kv_cache_dtype": "fp8", "engine": "trtllm"},
        "TP1 replicas",
        {"gpu": 15220},
        "TensorRT-LLM perf-overview.md (source trtllm_perf_overview_v1)",
    ),
)


def best_published_mfu(gpu_substring: str, precision: str = "bf16") -> tuple[float, str]:
    """The highest MFU (model FLOPs over the dense BF16 peak) any training record of this GPU family and GEMM
    precision reports, or derives from its model TFLOP/s per GPU: (mfu, record id)."""
    best = (0.0, "")
    for rec in load_records():
        if gpu_substring not in rec["cluster"]["gpu_type"] or _record_precision(rec) != precision:
            continue
        mfu = _record_mfu(rec)
        if mfu is not None and mfu > best[0]:
            best = (mfu, rec["id"])
    return best


def _record_precision(rec: Record) -> str:
    return "fp8" if str(rec.get("precision", "")).upper().startswith("FP8") else "bf16"


def published_step_time(record_id: str) -> float | None:
    """A record's step time as its source gives it (measured, or derived from its reported throughput)."""
    for rec in load_records():
        if rec["id"] == record_id:
            t = rec["measured"].get("step_time_s") or rec.get("derived", {}).get("step_time_s")
            return float(t) if t else None
    return None


def _record_mfu(rec: Record) -> float | None:
    if rec.get("kind") != "training_throughput":
        return None
    mfu = rec["measured"].get("mfu")
    if mfu:
        return float(mfu)
    tflops = rec["measured"].get("tflops_per_gpu")
    if tflops and "model TFLOP" in str(rec.get("flops_convention", "")):
        gpu = resolve_gpu(rec["cluster"]["gpu_type"])
        return float(tflops) / gpu.bf16_tflops
    return None
