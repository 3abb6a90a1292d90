"""Exports use only option names their tool documents, and carry the plan faithfully."""

from __future__ import annotations

import json
import re
import tomllib
from importlib import resources

import pytest

from optimizer.errors import DomainError
from optimizer.exports.launch import TOOLS, export, megatron_layout
from optimizer.frameworks.capabilities import framework, unsupported_knob
from optimizer.spec.model_loading import load_model_preset
from optimizer.spec.names import SCHEDULERS
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import InferenceWorkload, TrainingWorkload
from tests.optimizer.helpers import megatron_interleaved

REGISTRY = json.loads((resources.files("optimizer.exports") / "export_options.json").read_text())
W = TrainingWorkload(global_batch_size=2048, seq_len=8192)
WI = InferenceWorkload(prompt_len=2048, output_len=256, batch=8, precision="fp8", kv_cache_dtype="fp8")
TRAIN_CONFIGS = [
    megatron_interleaved(tp=8, pp=16, dp=16, vp=2, tp_comm_overlap=True, layers_per_stage=[6] + [8] * 15),
    ParallelConfig(tp=8, pp=1, dp=8, zero_stage=3, recompute="full", mbs=2),
    ParallelConfig(tp=4, pp=9, dp=4, cp=2, recompute="selective", sequence_parallel=True, schedule="1f1b"),
    ParallelConfig(tp=4, pp=9, dp=4, recompute="selective", sequence_parallel=True, schedule="1f1b"),
]


@pytest.mark.parametrize("tool", ["megatron", "deepspeed", "torchtitan"])
@pytest.mark.parametrize("cfg", TRAIN_CONFIGS)
def test_training_exports_use_documented_options(tool: str, cfg: ParallelConfig) -> None:
    bad = unsupported_knob(framework(tool), cfg)
    if bad is not None:  # a knob the tool cannot run is an error naming it, never a different configuration
        with pytest.raises(DomainError) as exc:
            export(tool, load_model_preset("llama-3.1-405b"), W, cfg)
        assert exc.value.field == f"export.{bad[0]}" and bad[1] in exc.value.rule
        return
    e = export(tool, load_model_preset("llama-3.1-405b"), W, cfg)
    unknown = set(e.options) - set(REGISTRY[tool]["options"])
    assert not unknown, f"{tool} export uses undocumented options {unknown}"
    if e.format == "args":
        flags = set(re.findall(r"(?<!\S)--[a-z0-9-]+", e.content))
        assert flags == {o for o in e.options if o.startswith("--")}


@pytest.mark.parametrize("tool", ["vllm", "sglang"])
def test_serving_exports_use_documented_options(tool: str) -> None:
    cfg = ParallelConfig(tp=8, pp=2, ep=8, layers_per_stage=[28, 33])
    e = export(tool, load_model_preset("deepseek-v3"), WI, cfg)
    assert not set(e.options) - set(REGISTRY[tool]["options"])
    assert "--quantization fp8" in e.content


@pytest.mark.parametrize(("ep", "etp"), [(8, 1), (1, 8)])
def test_attention_dp_exports_the_engines_own_layouts(ep: int, etp: int) -> None:
    """Attention DP 8 sharing the experts (EP 8, or tensor-sharded over 8): SGLang's --tp-size is all 8 GPUs with
    --dp-size 8 --enable-dp-attention (it asserts tp_size % dp_size == 0); vLLM takes DP 8 x TP 1 and EP only when
    the experts are whole; TensorRT-LLM tp_size 8 with enable_attention_dp."""
    cfg = ParallelConfig(tp=1, pp=1, dp=8, ep=ep, etp=etp, layers_per_stage=[61])
    ds = load_model_preset("deepseek-v3")
    sgl = export("sglang", ds, WI, cfg).content
    assert "--tp-size 8" in sgl and "--dp-size 8" in sgl and "--enable-dp-attention" in sgl
    assert ("--ep-size 8" in sgl) == (ep == 8)
    vll = export("vllm", ds, WI, cfg).content
    assert "--data-parallel-size 8" in vll and ("--enable-expert-parallel" in vll) == (ep == 8)
    trt = export("trtllm", ds, WI, cfg).content
    assert "--tp_size 8" in trt and "enable_attention_dp: true" in trt


def test_megatron_layout_round_trip() -> None:
    layers = [6] + [8] * 14 + [6]
    text = megatron_layout(layers, 2)
    segs = text.split("|")
    assert len(segs) == 32 and segs[0].startswith("E") and segs[-1].endswith("L")
    counts = [sum(int(t.split("*")[1]) if "*" in t else 1 for t in s.split(",") if t.startswith("t")) for s in segs]
    per_rank = [counts[r] + counts[16 + r] for r in range(16)]
    assert per_rank == layers


def test_megatron_batch_and_degrees() -> None:
    e = export("megatron", load_model_preset("llama-3.1-405b"), W, TRAIN_CONFIGS[0])
    assert "--tensor-model-parallel-size 8" in e.content and "--pipeline-model-parallel-size 16" in e.content
    assert "--global-batch-size 2048" in e.content and "--use-distributed-optimizer" in e.content


def test_deepspeed_json_batch_identity() -> None:
    cfg = TRAIN_CONFIGS[1]
    doc = json.loads(export("deepspeed", load_model_preset("llama-3-70b"), W, cfg).content)
    assert doc["train_batch_size"] == doc["train_micro_batch_size_per_gpu"] * doc["gradient_accumulation_steps"] * 8
    assert doc["zero_optimization"]["stage"] == 3 and doc["tensor_parallel"]["autotp_size"] == 8


def test_torchtitan_toml_parses_and_splits() -> None:
    doc = tomllib.loads(export("torchtitan", load_model_preset("llama-3.1-405b"), W, TRAIN_CONFIGS[0]).content)
    par = doc["parallelism"]
    assert par["tensor_parallel_degree"] == 8 and par["pipeline_parallel_schedule"] == "Interleaved1F1B"
    parts = par["module_fqns_per_model_part"]
    assert len(parts) == 32
    assert sum(1 for p in parts for n in p if n.startswith("layers.")) == 126


def test_mode_mismatch_is_an_error() -> None:
    with pytest.raises(DomainError):
        export("vllm", load_model_preset("llama-3-8b"), W, ParallelConfig())
    with pytest.raises(DomainError):
        export("megatron", load_model_preset("llama-3-8b"), WI, ParallelConfig())
    with pytest.raises(DomainError) as exc:
        export("nemo", load_model_preset("llama-3-8b"), W, ParallelConfig())
    assert "megatron" in str(exc.value)
    assert set(TOOLS) | set(SCHEDULERS) == set(REGISTRY) - {"_about"}


def test_megatron_export_builds_the_planned_architecture() -> None:
    """A DeepSeek-V3 plan exported to Megatron must build DeepSeek-V3: MLA with its ranks and head sizes, the
    shared expert, three dense layers before the MoE ones, and the plan's recompute modules; a Qwen3 plan its
    head size (--kv-channels). Every flag is in the registry."""
    from optimizer.exports.launch import moe_layer_pattern
    from tests.optimizer.spec.test_recompute_modules import DS_RECIPE, W_DS

    ds, w = load_model_preset("deepseek-v3"), W_DS  # NVIDIA's DeepSeek-V3 H100 recipe
    cfg = DS_RECIPE.model_copy(update={"recompute": "selective", "recompute_modules": ("mla_up_proj", "mlp")})
    e = export("megatron", ds, w, cfg)
    assert not set(e.options) - set(REGISTRY["megatron"]["options"])
    for flag in (
        "--multi-latent-attention",
        "--q-lora-rank 1536",
        "--kv-lora-rank 512",
        "--qk-head-dim 128",
        "--qk-pos-emb-head-dim 64",
        "--v-head-dim 128",
        "--moe-shared-expert-intermediate-size 2048",
        '--moe-layer-freq "([0]*3+[1]*58)"',
        "--recompute-modules mla_up_proj mlp",
    ):
        assert flag in e.content, flag
    assert "--group-query-attention" not in e.content
    pattern = eval(moe_layer_pattern(ds))  # Megatron evaluates the same expression (moe_freq_type)
    assert pattern == [1 if ds.is_moe_layer(i) else 0 for i in range(ds.num_layers)]
    from tests.optimizer.search.test_expert_grid import QWEN3_235B, RECIPE

    qwen = export("megatron", QWEN3_235B, TrainingWorkload(global_batch_size=8192, seq_len=4096), RECIPE).content
    assert "--kv-channels 128" in qwen and "--num-query-groups 4" in qwen


@pytest.mark.parametrize(
    ("kernel", "flash", "flag"),
    [
        ("fa3", True, "--attention-backend fused"),
        ("fa2", True, "--attention-backend flash"),
        (None, False, "--attention-backend unfused"),
    ],
)
def test_megatron_export_names_the_priced_attention_backend(kernel: str | None, flash: bool, flag: str) -> None:
    w = TrainingWorkload(global_batch_size=2048, seq_len=8192, attention_kernel=kernel, flash_attention=flash)  # type: ignore[arg-type]
    assert flag in export("megatron", load_model_preset("llama-3.1-405b"), w, TRAIN_CONFIGS[0]).content


def test_megatron_export_leaves_the_backend_to_te_when_the_kernel_is_not_pinned() -> None:
    assert (
        "--attention-backend"
        not in export("megatron", load_model_preset("llama-3.1-405b"), W, TRAIN_CONFIGS[0]).content
    )


def test_serving_exports_carry_the_engine_knobs_the_plan_was_priced_with() -> None:
    """The engine limits a workload sets reach the launch command under the engine's own option names, each one the
    registry documents (issue 39)."""
    from optimizer.spec.model_loading import load_model_preset
    from optimizer.spec.workload import InferenceWorkload

    model = load_model_preset("llama-3-8b")
    registry = json.loads((resources.files("optimizer.exports") / "export_options.json").read_text())
    base = InferenceWorkload(prompt_len=512, output_len=128, batch=8)
    cases = {
        "vllm": (
            {"cuda_graphs": False, "chunked_prefill": False, "max_batched_tokens": 4096},
            ["--enforce-eager", "--no-enable-chunked-prefill", "--max-num-batched-tokens 4096"],
        ),
        "sglang": (
            {"cuda_graph_max_batch": 48, "chunked_prefill": False},
            ["--cuda-graph-max-bs 48", "--chunked-prefill-size -1"],
        ),
        "trtllm": (
            {"cuda_graph_max_batch": 64, "chunked_prefill": True},
            ["cuda_graph_config: {max_batch_size: 64}", "enable_chunked_prefill: true"],
        ),
    }
    for tool, (knobs, expected) in cases.items():
        w = base.model_copy(update={"engine": tool, **knobs})
        e = export(tool, model, w, ParallelConfig(tp=1), "meta-llama/Llama-3.1-8B")
        for text in expected:
            assert text in e.content, (tool, text, e.content)
        assert set(e.options) <= set(registry[tool]["options"]), set(e.options) - set(registry[tool]["options"])
        plain = export(tool, model, base.model_copy(update={"engine": tool}), ParallelConfig(tp=1), "m")
        for text in expected:
            assert text not in plain.content


def test_serving_exports_set_the_memory_share_the_plan_was_priced_with() -> None:
    """SGLang's default mem_fraction_static depends on TP (0.81 at TP 8): the export sets what the estimate used,
    not 0.9 [issue 50 §3]; vLLM's block size is set too."""
    from optimizer.exports.launch import export as export_plan
    from optimizer.spec.model_loading import load_model_preset
    from optimizer.spec.parallel_config import ParallelConfig
    from optimizer.spec.workload import InferenceWorkload

    model = load_model_preset("llama-3-70b")
    w = InferenceWorkload(prompt_len=512, output_len=128, batch=8, engine="sglang")
    text = export_plan("sglang", model, w, ParallelConfig(tp=8, layers_per_stage=[80])).content
    assert "--mem-fraction-static 0.81" in text
    vllm = export_plan(
        "vllm", model, w.model_copy(update={"engine": "vllm"}), ParallelConfig(tp=8, layers_per_stage=[80])
    ).content
    assert "--gpu-memory-utilization 0.9" in vllm and "--block-size 16" in vllm


@pytest.mark.parametrize(
    ("tool", "says"),
    [
        ("vllm", '\'{"method": "deepseek_mtp", "num_speculative_tokens": 2}\''),
        ("sglang", "--speculative-num-steps 2"),
        ("trtllm", "num_nextn_predict_layers: 2"),
    ],
)
def test_a_plan_priced_with_speculative_decoding_launches_with_it(tool: str, says: str) -> None:
    """The launch itself carries the engine's speculative options (it was only a note before issue 53), with
    DeepSeek-V3's own MTP head as the drafter; the note says the acceptance the plan assumed."""
    from optimizer.exports.launch import export as export_plan
    from optimizer.spec.model_loading import load_model_preset
    from optimizer.spec.parallel_config import ParallelConfig
    from optimizer.spec.workload import InferenceWorkload

    w = InferenceWorkload(prompt_len=512, output_len=128, batch=8, engine=tool, spec_tokens=2, acceptance_rate=0.7)
    out = export_plan(
        tool, load_model_preset("deepseek-v3"), w, ParallelConfig(tp=8, ep=8, etp=1, layers_per_stage=[61])
    )
    assert says in out.content, out.content
    assert any("acceptance 0.7" in n for n in out.notes), out.notes
    assert set(out.options) <= set(REGISTRY[tool]["options"]), set(out.options) - set(REGISTRY[tool]["options"])
