"""The Megatron-LM export goes through Megatron-LM's own argument code, and what Megatron would build is what was
priced, field by field.

Pinned release: Megatron-LM core_v0.19.0 (tag 5be96267, 2026-08-19; megatron-core 0.19.1). Its training code
(megatron/training/arguments.py: parse_args, validate_args; argument_utils.py: gpt_config_from_args, which
pretrain_gpt.py builds its model from) is on no package index, so tests/frameworks/megatron/source.txt unpacks the
tag from the local snapshot of github:NVIDIA/Megatron-LM, and requirements.txt installs what it imports on a CPU
(torch 2.13.0, the CPU build on this machine's disk): `.venv/bin/python tests/frameworks/install.py megatron`
(`make frameworks`), cached in ~/.cache/meshplan/frameworks and linked as .frameworks/megatron. check.py stands in
the GPU runtime only (device capability, Triton and TE kernels, TE's version; see its docstring).

One subprocess checks every export (about a minute of Megatron imports)."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest

from optimizer.exports.export_record import Export
from optimizer.exports.launch import _default_layers, export
from optimizer.exports.megatron_model import padded_vocab
from optimizer.spec.model_loading import load_model_file, load_model_preset, preset_names
from optimizer.spec.model_spec import ModelSpec
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.stage_layers import virtual_split
from optimizer.spec.workload import TrainingWorkload
from tests.frameworks.harness import check
from tests.optimizer.helpers import megatron_interleaved

ROOT = Path(__file__).resolve().parents[2]
W = TrainingWorkload(global_batch_size=512, seq_len=4096)
QWEN2 = load_model_file(ROOT / "examples" / "qwen2-7b-config.json")


def _tp8(model: ModelSpec) -> ParallelConfig:
    return ParallelConfig(tp=8, pp=1, dp=8, ep=8 if model.moe else 1, mbs=1, zero_stage=1, sequence_parallel=True)


def _presets() -> list[tuple[str, ModelSpec, TrainingWorkload, ParallelConfig]]:
    cases = [(n, load_model_preset(n), W, _tp8(load_model_preset(n))) for n in preset_names()]
    return [*cases, ("qwen2-7b-config.json", QWEN2, W, ParallelConfig(tp=4, pp=2, dp=8, mbs=1, zero_stage=1))]


def _hand_built() -> list[tuple[str, ModelSpec, TrainingWorkload, ParallelConfig]]:
    llama8, llama70, l405 = (load_model_preset(n) for n in ("llama-3-8b", "llama-3-70b", "llama-3.1-405b"))
    mixtral, ds = load_model_preset("mixtral-8x7b"), load_model_preset("deepseek-v3")
    fp8 = W.model_copy(update={"precision": "fp8"})
    return [
        ("cp2 tp2 full recompute", llama8, W, ParallelConfig(tp=2, cp=2, dp=2, mbs=1, recompute="full")),
        ("ep4 etp1 tp2", mixtral, W, ParallelConfig(tp=2, pp=2, dp=4, ep=4, etp=1, mbs=1, zero_stage=1)),
        ("interleaved vp5 even", llama70, W, megatron_interleaved(tp=4, pp=4, dp=2, vp=5, mbs=1)),
        ("pp16 vp4 uneven", l405, W, megatron_interleaved(tp=8, pp=16, dp=2, vp=4, layers_per_stage=[6] + [8] * 15)),
        ("pp3 uneven, fp8", llama70, fp8, ParallelConfig(tp=8, pp=3, dp=2, mbs=1, layers_per_stage=[26, 27, 27])),
        (
            "mtp, ep8, selective recompute",
            ds.model_copy(update={"mtp_layers": 1}),
            W,
            ParallelConfig(
                tp=2,
                pp=4,
                dp=8,
                ep=8,
                etp=1,
                mbs=1,
                zero_stage=1,
                recompute="selective",
                layers_per_stage=[14, 16, 16, 15],
            ),
        ),
        ("tp1 dp only", llama8, W, ParallelConfig(tp=1, dp=8, mbs=2, zero_stage=1)),
    ]


def _planned() -> list[tuple[str, ModelSpec, TrainingWorkload, ParallelConfig]]:
    """The planner's picks, as `meshplan plan --export megatron --json` makes them."""
    from optimizer.spec.parallel_config import ParallelConfig as PC

    out = []
    for model, cluster, gbs in (("llama-3-70b", "dgx-h100:8", 512), ("llama-3-8b", "dgx-a100:2", 256)):
        args = ["plan", "--model", model, "--cluster", cluster, "--gbs", str(gbs), "--seq-len", "4096"]
        done = subprocess.run(
            [str(ROOT / ".venv" / "bin" / "meshplan"), *args, "--export", "megatron", "--json"],
            capture_output=True,
            text=True,
            cwd=ROOT,
            check=True,
        )
        doc = json.loads(done.stdout)
        cfg = PC.model_validate(doc["plan"]["config"])
        out.append(
            (
                f"planned {model} on {cluster}",
                load_model_preset(model),
                W.model_copy(update={"global_batch_size": gbs}),
                cfg,
                Export.model_validate(doc["export"]),
            )
        )
    return out  # type: ignore[return-value]


def _payload(e: Export, c: ParallelConfig, gpu: str = "H100", env: dict[str, str] | None = None) -> dict[str, Any]:
    argv = shlex.split(e.content.replace("\\\n", " "))  # the tokens bash makes of the pasted arguments
    return {"argv": argv, "env": e.env if env is None else env, "world_size": c.tp * c.pp * c.cp * c.dp, "gpu": gpu}


CASES = _presets() + _hand_built()


@pytest.fixture(scope="module")
def built() -> dict[str, Any]:
    """What Megatron made of every export, by case name (one check.py run)."""
    planned = _planned()
    exports = [export("megatron", m, w, c, model_ref=m.name) for _, m, w, c in CASES]
    payloads = [_payload(e, c) for e, (_, _, _, c) in zip(exports, CASES, strict=True)]
    payloads += [_payload(e, c) for _, _, _, c, e in planned]
    tp8 = export("megatron", load_model_preset("llama-3-8b"), W, ParallelConfig(tp=8, dp=1))
    bare = ParallelConfig(tp=8, dp=1)
    payloads += [_payload(tp8, bare, env={}), _payload(tp8, bare), _payload(tp8, bare, "B200", env={})]
    results = check("megatron", payloads, timeout=900)["results"]
    names = [n for n, *_ in CASES] + [p[0] for p in planned] + ["env removed", "env set", "env removed, B200"]
    cases = {n: (m, w, c, e) for (n, m, w, c), e in zip(CASES, exports, strict=True)}
    cases |= {p[0]: (p[1], p[2], p[3], p[4]) for p in planned}
    return {"results": dict(zip(names, results, strict=True)), "cases": cases}


def _expected_model(m: ModelSpec, c: ParallelConfig) -> dict[str, Any]:
    act = {"swiglu": "silu", "gelu": "gelu", "squared_relu": "squared_relu"}[m.activation]
    kind = {"rope": "rope", "learned": "learned_absolute", "alibi": "none"}[m.positions]
    s = m.rope_scaling
    exp: dict[str, Any] = {
        "num_layers": m.num_layers,
        "hidden_size": m.hidden_size,
        "ffn_hidden_size": m.ffn_hidden_size,
        "num_attention_heads": m.num_attention_heads,
        "normalization": "RMSNorm" if m.norm == "rmsnorm" else "LayerNorm",
        "layernorm_epsilon": m.norm_eps,
        "gated_linear_unit": m.activation == "swiglu",
        "activation": act,
        "position_embedding_type": kind,
        "add_bias_linear": m.linear_bias,
        "add_qkv_bias": m.linear_bias or m.qkv_bias,
        "qk_layernorm": m.qk_norm,
        "share_embeddings_and_output_weights": m.tied_embeddings,
        "padded_vocab_size": padded_vocab(m.vocab_size, c.tp)[1],
        "hidden_dropout": 0.1 if m.dropout else 0.0,
        "attention_dropout": 0.1 if m.dropout else 0.0,
        "mtp_num_layers": m.mtp_layers or None,
        "multi_latent_attention": m.mla is not None,
        "rope_scaling": s is not None and s.type == "llama3",
    }
    if m.positions == "rope":
        exp |= {"rotary_base": m.rope_theta, "rotary_percent": m.rotary_fraction}
    if s is not None and s.type == "llama3":
        exp["rope_scaling_factor"] = s.factor
    if m.mla is None:
        exp |= {
            "num_query_groups": m.kv_heads,
            "kv_channels": m.head_size,
        }
    else:
        exp |= {
            "q_lora_rank": m.mla.q_lora_rank,
            "kv_lora_rank": m.mla.kv_lora_rank,
            "qk_head_dim": m.mla.qk_nope_head_dim,
            "qk_pos_emb_head_dim": m.mla.qk_rope_head_dim,
            "v_head_dim": m.mla.v_head_dim,
        }
        if s is not None:
            exp |= {
                "rotary_scaling_factor": s.factor,
                "mscale": s.mscale,
                "mscale_all_dim": s.mscale_all_dim,
                "beta_fast": s.beta_fast,
                "beta_slow": s.beta_slow,
                "original_max_position_embeddings": s.original_max_position_embeddings,
            }
    return exp | _expected_moe(m)


def _expected_moe(m: ModelSpec) -> dict[str, Any]:
    if m.moe is None:
        return {"num_moe_experts": None}
    r = m.moe.router
    return {
        "num_moe_experts": m.moe.num_experts,
        "moe_router_topk": m.moe.top_k,
        "moe_ffn_hidden_size": m.moe.expert_ffn_hidden_size,
        "moe_shared_expert_intermediate_size": m.moe.shared_ffn or None,
        "moe_layer_freq": [1 if m.is_moe_layer(i) else 0 for i in range(m.num_layers)]
        if m.moe.first_k_dense or m.moe.layer_freq > 1
        else 1,
        "moe_router_score_function": r.score_function,
        "moe_router_pre_softmax": r.pre_softmax,
        "moe_router_enable_expert_bias": r.expert_bias,
        "moe_router_topk_scaling_factor": r.topk_scaling_factor,
        "moe_router_load_balancing_type": r.load_balancing,
        "moe_aux_loss_coeff": r.aux_loss_coeff,
        "moe_router_num_groups": m.moe.num_groups,
        "moe_router_group_topk": m.moe.group_topk,
        "moe_grouped_gemm": True,
    }


def _expected_parallel(m: ModelSpec, w: TrainingWorkload, c: ParallelConfig) -> dict[str, Any]:
    layers = c.layers_per_stage or _default_layers(m, c, "megatron")
    return {
        "tp": c.tp,
        "pp": c.pp,
        "cp": c.cp,
        "dp": c.dp,
        "ep": c.ep,
        "etp": c.expert_tp if m.moe is not None else c.tp,
        "vp": c.vp if c.vp > 1 else None,
        "sequence_parallel": c.sequence_parallel and c.tp > 1,
        "stage_layers": [virtual_split(n, c.vp) for n in layers] if c.pp > 1 or c.vp > 1 else None,
        "recompute_granularity": None if c.recompute == "none" else c.recompute,
        "use_distributed_optimizer": c.zero_stage >= 1,
        "bf16": w.precision in ("bf16", "fp8"),
        "fp8": "hybrid" if w.precision == "fp8" else None,
        "micro_batch_size": c.mbs,
        "global_batch_size": w.global_batch_size,
        "seq_length": w.seq_len,
    }


def _compare(got: dict[str, Any], expected: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    return {k: (got.get(k), v) for k, v in expected.items() if got.get(k) != v}


@pytest.mark.parametrize("name", [n for n, *_ in CASES])
def test_megatron_accepts_the_export_and_builds_the_priced_model(built: dict[str, Any], name: str) -> None:
    """Every preset (and the README's Qwen2 config.json) and the hand-built plans covering TP, CP, EP + ETP, uneven
    PP, interleaved VP, MTP, recompute, FP8 and the distributed optimizer: Megatron's parse_args and validate_args
    accept the export, and its TransformerConfig / GPTModelConfig equal the ModelSpec and ParallelConfig."""
    r = built["results"][name]
    assert r["ok"], f"Megatron-LM refused the export: {r.get('error')}"
    m, w, c, e = built["cases"][name]
    got = r["result"]
    if got["stage_layers"] is None and (c.pp > 1 or c.vp > 1):  # an even split: no layout, Megatron divides
        per = m.num_layers // (c.pp * c.vp)
        got = got | {"stage_layers": [[per] * c.vp for _ in range(c.pp)]}
    expected = _expected_model(m, c) | _expected_parallel(m, w, c)
    if c.pipeline_layout is not None:
        expected.pop("stage_layers")
    assert _compare(got, expected) == {}
    if m.positions == "alibi" or padded_vocab(m.vocab_size, c.tp)[1] != m.vocab_size:
        assert e.notes, "what Megatron cannot build as priced is said in a note"


@pytest.mark.parametrize("name", ["planned llama-3-70b on dgx-h100:8", "planned llama-3-8b on dgx-a100:2"])
def test_the_planner_s_pick_exported_by_the_cli_is_what_megatron_builds(built: dict[str, Any], name: str) -> None:
    r = built["results"][name]
    assert r["ok"], f"Megatron-LM refused the export: {r.get('error')}"
    m, w, c, _ = built["cases"][name]
    assert _compare(r["result"], _expected_model(m, c) | _expected_parallel(m, w, c)) == {}


def test_tensor_parallelism_needs_cuda_device_max_connections_before_blackwell(built: dict[str, Any]) -> None:
    """validate_args refuses TP > 1 on Hopper without CUDA_DEVICE_MAX_CONNECTIONS=1 (arguments.py, core_v0.19.0),
    accepts the export's env, and does not ask for it on Blackwell."""
    res = built["results"]
    assert not res["env removed"]["ok"] and "CUDA_DEVICE_MAX_CONNECTIONS" in res["env removed"]["error"]
    assert res["env set"]["ok"], res["env set"].get("error")
    assert res["env removed, B200"]["ok"], res["env removed, B200"].get("error")
