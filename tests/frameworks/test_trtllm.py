"""TensorRT-LLM launches are checked against the option list the project cites and parse as YAML, with the values
the plan priced [issue 53 §1].

TensorRT-LLM cannot be installed here: its wheel is on NVIDIA's own package index, not PyPI (the only index this
machine and CI reach), and its pinned source (github:NVIDIA/TensorRT-LLM) is a 2.5 GB snapshot, over the 500 MiB the
search tool's fetch brings, and no copy is under /work/.mirror. So instead of trtllm-serve's click parser
(tensorrt_llm/commands/serve.py) and TorchLlmArgs (tensorrt_llm/llmapi/llm_args.py), each launch, as bash hands
it to trtllm-serve, is checked flag by flag against optimizer/exports/export_options.json (the trtllm entry cites
serve.py and llm_args.py, read at v1.0.0), the extra-options file the launch writes is loaded with yaml.safe_load
(what trtllm-serve does with --extra_llm_api_options) and its dotted keys checked against the same list, and every
value is compared with what the plan priced.
"""

from __future__ import annotations

import json
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from tests.frameworks.serving_plans import Launch, hand_built, real_plans
from tests.optimizer.exports.test_export_paste import argv, flag_values

REGISTRY = set(
    json.loads((resources.files("optimizer.exports") / "export_options.json").read_text())["trtllm"]["options"]
)


def dotted(doc: dict[str, Any], prefix: str = "") -> set[str]:
    """The YAML's keys as the registry names them: each leaf by its path (a.b), a null or scalar key by itself."""
    out = set()
    for k, v in doc.items():
        out |= dotted(v, prefix + k + ".") if isinstance(v, dict) else {prefix + k}
    return out


def pasted(la: Launch) -> tuple[dict[str, list[str]], dict[str, Any]]:
    with tempfile.TemporaryDirectory() as scratch:
        args = argv(la.export.script(), "trtllm-serve", cwd=Path(scratch))
        extra = Path(scratch) / "extra.yml"
        doc = yaml.safe_load(extra.read_text()) if extra.exists() else {}
    assert args[0] == la.export.content.split("trtllm-serve ")[1].split()[0]
    return flag_values(args[1:]), doc


def test_every_trtllm_launch_uses_cited_options_with_the_priced_values() -> None:
    seen = set()
    for la in real_plans("trtllm") + hand_built("trtllm", None) + hand_built("trtllm", "1.0.0"):
        flags, doc = pasted(la)
        assert set(flags) <= REGISTRY and dotted(doc) <= REGISTRY, (la.label, set(flags) - REGISTRY, dotted(doc))
        w, c, lim = la.w, la.c, la.limits()
        got = {k: v[0] if v else None for k, v in flags.items()}
        assert got["--backend"] == ("tensorrt" if w.trtllm_backend == "tensorrt" else "pytorch")
        assert int(got["--tp_size"]) == c.tp * c.dp and int(got["--pp_size"]) == c.pp, la.label
        assert int(got["--max_batch_size"]) == (w.max_seqs if w.max_seqs is not None else w.batch), la.label
        assert int(got["--max_seq_len"]) == w.prompt_len + w.output_len
        assert float(got["--kv_cache_free_gpu_memory_fraction"]) == lim.memory_fraction, la.label
        assert got.get("--max_num_tokens") == (str(w.max_batched_tokens) if w.max_batched_tokens else None)
        assert got.get("--ep_size") == (str(c.ep) if c.ep > 1 else None)
        assert doc.get("enable_attention_dp", False) == (c.dp > 1)
        assert (doc.get("kv_cache_config") or {}).get("dtype") == ("fp8" if w.kv_cache_dtype == "fp8" else None)
        graphs = doc.get("cuda_graph_config", {})
        if w.cuda_graphs is False:
            assert graphs is None, la.label
        elif "cuda_graph_config" in doc:
            assert graphs["max_batch_size"] == lim.graph_max_batch, la.label  # 128 at 1.0.0 (engine_releases)
            seen.add("graphs")
        if w.spec_tokens:
            spec = doc["speculative_config"]
            if la.model == "deepseek-v3":
                assert spec == {"decoding_type": "MTP", "num_nextn_predict_layers": w.spec_tokens}
            else:
                assert spec["decoding_type"] == "Eagle" and spec["max_draft_len"] == w.spec_tokens
            seen.add("spec")
        seen.add(la.role)
    assert seen >= {"graphs", "spec", "replica"}


def test_a_fleet_group_launches_with_its_own_limit_not_the_workloads() -> None:
    """A user's max_seqs bound on the SLA search is not the group's limit: each group launches with the limit it
    was priced with (before issue 53 TensorRT-LLM wrote the workload's max_seqs for every group)."""
    from optimizer.exports.launch import export_fleet
    from optimizer.spec.model_loading import load_model_preset
    from optimizer.spec.workload import InferenceWorkload
    from tests.frameworks.serving_plans import mixed_fleet

    w = InferenceWorkload(
        prompt_len=4096, output_len=256, rate=2, tpot_ms=40, objective="gpus", engine="trtllm", max_seqs=2048
    )
    fleet = mixed_fleet()
    for g, e in zip(fleet.groups, export_fleet("trtllm", load_model_preset("llama-3-70b"), w, fleet), strict=True):
        assert f"--max_batch_size {g.shape.max_seqs} " in e.content.replace("\\\n", "")


def test_a_plan_priced_on_the_tensorrt_backend_launches_it() -> None:
    from optimizer.exports.launch import export
    from optimizer.spec.model_loading import load_model_preset
    from optimizer.spec.parallel_config import ParallelConfig
    from optimizer.spec.workload import InferenceWorkload

    w = InferenceWorkload(prompt_len=1024, output_len=128, batch=8, engine="trtllm", trtllm_backend="tensorrt")
    e = export("trtllm", load_model_preset("llama-3-8b"), w, ParallelConfig(tp=1), "ENGINE_DIR")
    flags = flag_values(argv(e.script(), "trtllm-serve")[1:])
    assert flags["--backend"] == ["tensorrt"]
