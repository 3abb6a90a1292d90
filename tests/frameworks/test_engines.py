"""vLLM and SGLang launches parse with each engine's own argument parser at the release the plan names, and what the
engine parsed is what the plan priced, field by field [issue 53 §1].

Pinned releases (tests/frameworks/<name>/, built by `.venv/bin/python tests/frameworks/install.py <name>`, cached):
- vllm-0.11: vLLM 0.11.0 (the newest release optimizer/costmodel/engine_releases.py knows; plans without an
  engine_version are checked here), and vllm-0.6: vLLM 0.6.0 (V0 scheduler: no --data-parallel-size, chunked
  prefill a true / false option, --speculative-model), both from PyPI with `--no-deps`
  (requirements-nodeps.txt: their wheels pin CUDA torch builds) and a hand-picked dependency list with the CPU
  torch 2.13.0 (requirements.txt). check.py: the `vllm serve` parser (FlexibleArgumentParser + make_arg_parser,
  which adds EngineArgs.add_cli_args) and EngineArgs.from_cli_args (tests/frameworks/vllm_parse.py).
- sglang-0.5: SGLang 0.5.3 (the newest SGLang release the table knows), the same way; sglang-0.3: SGLang 0.3.0, whose
  wheel needs no GPU stack, with its dependencies. check.py: ServerArgs.add_cli_args + ServerArgs.from_cli_args,
  so ServerArgs.__post_init__ fills and validates (tests/frameworks/sglang_parse.py).
Only the GPU runtime is stood in (the platform / device queries, a CUDA extension that cannot load); no engine is
built. One subprocess per environment checks every launch of the module.
"""

from __future__ import annotations

import functools
from typing import Any

import pytest

from optimizer.errors import DomainError
from optimizer.exports.launch import export
from optimizer.spec.model_loading import load_model_preset
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import InferenceWorkload
from tests.frameworks.harness import check
from tests.frameworks.serving_plans import H100, Launch, hand_built, hf_config, launcher_argv, real_plans

# The environment each (engine, engine_version) launch is parsed by: the release the plan names.
# No engine_version: the newest options, checked at the newest release the table knows.
ENVS = {
    ("vllm", None): "vllm-0.11",
    ("vllm", "0.11.0"): "vllm-0.11",
    ("vllm", "0.6.0"): "vllm-0.6",
    ("sglang", None): "sglang-0.5",
    ("sglang", "0.5.3"): "sglang-0.5",
    ("sglang", "0.3.0"): "sglang-0.3",
}
LAUNCHER = {"vllm": "vllm", "sglang": "python"}


@functools.cache
def launches(engine: str, version: str | None) -> list[Launch]:
    out = hand_built(engine, version)
    if version is None:
        out = real_plans(engine) + out
    return out


@functools.cache
def parsed(engine: str, version: str | None) -> list[dict[str, Any]]:
    """Every launch of (engine, version) through the engine's own parser, in one subprocess."""
    batch = launches(engine, version)
    payload: dict[str, Any] = {
        "launches": [launcher_argv(la.export, LAUNCHER[engine]) for la in batch],
        "models": {la.export.content.split("--model-path ")[1].split()[0]: hf_config(la.model) for la in batch}
        if engine == "sglang"
        else {},
        "gpu_memory_mib": batch[0].gpu_spec.memory_bytes / 2**20,
    }
    result: list[dict[str, Any]] = check(ENVS[(engine, version)], payload)["parsed"]
    return result


def vllm_expected(la: Launch, old: bool) -> dict[str, Any]:
    """What the plan priced, in vLLM's EngineArgs fields."""
    w, c, lim = la.w, la.c, la.limits()
    chunked = w.chunked_prefill if w.chunked_prefill is not None else (False if lim.mixes_prefill is False else None)
    out: dict[str, Any] = {
        "tensor_parallel_size": c.tp,
        "pipeline_parallel_size": c.pp,
        "data_parallel_size": None if old else c.dp,
        "max_num_seqs": w.max_seqs if w.max_seqs is not None else w.batch,
        "max_model_len": w.prompt_len + w.output_len,
        "gpu_memory_utilization": lim.memory_fraction,
        "block_size": lim.block_tokens,
        "kv_cache_dtype": "fp8" if w.kv_cache_dtype == "fp8" else "auto",
        "quantization": "fp8" if w.precision == "fp8" else None,
        "enable_chunked_prefill": chunked,
        "max_num_batched_tokens": w.max_batched_tokens,
        "enforce_eager": w.cuda_graphs is False,
    }
    if not old:
        out["enable_expert_parallel"] = c.ep > 1
        out["enable_eplb"] = bool(c.redundant_experts)
    return out


def vllm_actual(p: dict[str, Any], expected: dict[str, Any]) -> dict[str, Any]:
    return {k: p[k] for k in expected}


@pytest.mark.parametrize("version", [None, "0.11.0", "0.6.0"])
def test_every_vllm_launch_parses_and_is_what_was_priced(version: str | None) -> None:
    old = version == "0.6.0"
    for la, p in zip(launches("vllm", version), parsed("vllm", version), strict=True):
        expected = vllm_expected(la, old)
        assert vllm_actual(p, expected) == expected, (version, la.label)
        assert p["model"] == la.export.content.split()[2], la.label


def test_vllm_carries_the_priced_cuda_graphs_speculation_eplb_and_roles() -> None:
    """The largest captured decode batch is the one priced (vLLM 0.11.0 reads compilation_config
    cudagraph_capture_sizes; a max_cudagraph_capture_size key is silently dropped there), speculative decoding
    and redundant experts are in the launch, and a disaggregated role carries the NixlConnector."""
    seen = set()
    for la, p in zip(launches("vllm", None), parsed("vllm", None), strict=True):
        w, c, lim = la.w, la.c, la.limits()
        sizes = (p["compilation_config"] or {}).get("cudagraph_capture_sizes")
        if w.cuda_graph_max_batch is not None:
            assert sizes and max(sizes) == lim.graph_max_batch == w.cuda_graph_max_batch, (la.label, sizes)
            assert sizes == sorted(set(sizes)) and sizes[0] == 1  # every smaller batch pads up to a graph
            seen.add("graphs")
        spec = p["speculative_config"]
        if w.spec_tokens:
            assert spec["num_speculative_tokens"] == w.spec_tokens, la.label
            assert spec["method"] == ("deepseek_mtp" if la.model == "deepseek-v3" else "eagle")
            seen.add("spec")
        else:
            assert spec is None
        if c.redundant_experts:
            assert p["eplb_config"]["num_redundant_experts"] == c.redundant_experts, la.label
            seen.add("eplb")
        kv = p["kv_transfer_config"]
        assert (kv is not None and kv["kv_connector"] == "NixlConnector") == (la.role != "replica"), la.label
        seen.add(la.role)
    assert seen >= {"graphs", "spec", "eplb", "replica", "prefill", "decode"}


def test_vllm_06_launches_speculate_with_its_own_options() -> None:
    w = InferenceWorkload(
        prompt_len=2048, output_len=256, batch=16, engine="vllm", engine_version="0.6.0", spec_tokens=3,
        acceptance_rate=0.7,
    )  # fmt: skip
    e = export("vllm", load_model_preset("llama-3-8b"), w, ParallelConfig(tp=1), "meta-llama/Meta-Llama-3-8B")
    p = check(ENVS[("vllm", "0.6.0")], {"launches": [launcher_argv(e, "vllm")]})["parsed"][0]
    assert p["num_speculative_tokens"] == 3 and p["speculative_model"] == "DRAFT_MODEL"
    assert p["enable_chunked_prefill"] is False  # the V0 scheduler priced (engine_releases mixes_prefill False)


def sglang_expected(la: Launch, old: bool) -> dict[str, Any]:
    """What the plan priced, in SGLang's ServerArgs fields after __post_init__."""
    w, c, lim = la.w, la.c, la.limits()
    adp = c.attention_dp
    out: dict[str, Any] = {
        "tp_size": c.tp * c.dp if adp else c.tp,
        "dp_size": c.dp,
        "max_running_requests": w.max_seqs if w.max_seqs is not None else w.batch,
        "context_length": w.prompt_len + w.output_len,
        "mem_fraction_static": lim.memory_fraction,
        "page_size": None if old else lim.block_tokens,
        "quantization": "fp8" if w.precision == "fp8" else None,
        "kv_cache_dtype": ("fp8_e5m2" if old else "fp8_e4m3") if w.kv_cache_dtype == "fp8" else "auto",
        "disable_cuda_graph": w.cuda_graphs is False or la.role == "prefill",
    }
    if w.chunked_prefill is False:
        out["chunked_prefill_size"] = None if old else -1
    else:
        out["chunked_prefill_size"] = lim.max_batched_tokens
    if not old:
        out |= {"pp_size": c.pp, "ep_size": c.ep, "enable_dp_attention": adp, "enable_eplb": bool(c.redundant_experts)}
        out["ep_num_redundant_experts"] = c.redundant_experts
        out["disaggregation_mode"] = "null" if la.role == "replica" else la.role
    return out


def sglang_actual(p: dict[str, Any], la: Launch, expected: dict[str, Any]) -> dict[str, Any]:
    got = {k: p.get(k) for k in expected}
    # Each dp-attention rank admits max_running_requests // dp_size (python/sglang/srt/managers/tp_worker.py at
    # v0.5.3): the per-rank limit is what the plan priced.
    if la.c.attention_dp and got["max_running_requests"] is not None:
        got["max_running_requests"] //= la.c.dp
    return got


@pytest.mark.parametrize("version", [None, "0.5.3", "0.3.0"])
def test_every_sglang_launch_parses_and_is_what_was_priced(version: str | None) -> None:
    old = version == "0.3.0"
    for la, p in zip(launches("sglang", version), parsed("sglang", version), strict=True):
        expected = sglang_expected(la, old)
        assert sglang_actual(p, la, expected) == expected, (version, la.label)


def test_sglang_carries_the_priced_cuda_graphs_and_speculation() -> None:
    seen = set()
    for la, p in zip(launches("sglang", None), parsed("sglang", None), strict=True):
        w, lim = la.w, la.limits()
        if w.cuda_graph_max_batch is not None:
            assert p["cuda_graph_max_bs"] == lim.graph_max_batch == w.cuda_graph_max_batch, la.label
            seen.add("graphs")
        if w.spec_tokens:
            k = w.spec_tokens
            assert (p["speculative_algorithm"], p["speculative_num_steps"]) == ("EAGLE", k), la.label
            assert (p["speculative_eagle_topk"], p["speculative_num_draft_tokens"]) == (1, k + 1), la.label
            mtp = la.model == "deepseek-v3"  # SGLang reads DeepSeek's NextN head from the model itself
            ref = la.export.content.split("--model-path ")[1].split()[0]
            assert p["speculative_draft_model_path"] == (ref if mtp else "DRAFT_MODEL"), la.label
            seen.add("spec")
        else:
            assert p["speculative_algorithm"] is None, la.label
    assert seen == {"graphs", "spec"}


@pytest.mark.parametrize(
    ("engine", "version", "update", "cfg", "field"),
    [
        ("vllm", "0.6.0", {}, ParallelConfig(tp=1, dp=8, ep=8, etp=1), "export.dp"),
        ("vllm", "0.6.0", {"cuda_graph_max_batch": 48}, ParallelConfig(tp=1), "export.cuda_graph_max_batch"),
        ("sglang", "0.3.0", {}, ParallelConfig(tp=4, pp=2), "export.pp"),
        ("sglang", "0.3.0", {"spec_tokens": 2, "acceptance_rate": 0.7}, ParallelConfig(tp=1), "export.spec_tokens"),
        ("trtllm", "0.6.1", {}, ParallelConfig(tp=1), "export.engine_version"),
    ],
)
def test_a_knob_the_named_release_lacks_is_refused_naming_it(
    engine: str, version: str, update: dict[str, Any], cfg: ParallelConfig, field: str
) -> None:
    w = InferenceWorkload(prompt_len=1024, output_len=128, batch=8, engine=engine, engine_version=version, **update)  # type: ignore[arg-type]
    model = load_model_preset("deepseek-v3" if cfg.ep > 1 else "llama-3-8b")
    with pytest.raises(DomainError) as exc:
        export(engine, model, w, cfg.model_copy(update={"layers_per_stage": None}))
    assert exc.value.field == field and version in exc.value.rule


def test_the_launches_cover_the_plan_kinds() -> None:
    """Real plans of every kind reach the parsers: a dense and a MoE replica, an SLA fleet, a disaggregated one,
    a TP4 + TP8 fleet."""
    for engine in ("vllm", "sglang"):
        labels = [la.label for la in launches(engine, None)]
        roles = {la.role for la in launches(engine, None)}
        assert any("qwen3" in x for x in labels) and any("llama-3-8b" in x for x in labels)
        assert {"replica", "prefill", "decode"} <= roles
        tps = {la.c.tp for la in launches(engine, None) if la.label.startswith("TP4 + TP8")}
        assert tps == {4, 8} and all(la.gpu == H100 for la in launches(engine, None) if "TP4" in la.label)
