"""The torchtitan export is what torchtitan runs: each exported TOML goes through torchtitan's own ConfigManager
(`--job.config_file`, as `torchtitan.train` loads it) and its ParallelDims for the plan's world size, and what
torchtitan parsed equals the ParallelConfig and workload that were priced, field by field
(tests/frameworks/torchtitan/check.py).

Pinned: torchtitan 0.2.2 from PyPI (tests/frameworks/torchtitan/requirements.txt, with torch 2.13.0 CPU; built by
`.venv/bin/python tests/frameworks/install.py torchtitan`, cached outside the checkout). Not 0.3.0, the newest on
the mirror: its ConfigManager reads no TOML file at all (only `--module` / `--config` registry functions and CLI
overrides), while the export and the job scripts launch `-m torchtitan.train --job.config_file`; 0.2.2 is the newest
release that reads it. Stood in: torchtitan's Triton MoE kernel module (no Triton on a CPU-only machine)."""

from __future__ import annotations

import functools
from typing import Any

import pytest

from optimizer.errors import DomainError
from optimizer.exports.launch import export
from optimizer.exports.torchtitan_models import FLAVORS, flavor_shape, shape
from optimizer.search.planner import plan
from optimizer.search.space import SearchSpace, parse_pins
from optimizer.spec.cluster_loading import load_cluster_preset
from optimizer.spec.model_loading import load_model_preset
from optimizer.spec.model_spec import ModelSpec
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.pipeline_layout import rank_chunks
from optimizer.spec.workload import TrainingWorkload
from tests.frameworks.harness import Rejected, check

L8, L70 = load_model_preset("llama-3-8b"), load_model_preset("llama-3-70b")
CUSTOM = L8.model_copy(update={"name": "llama-3-8b-deep", "num_layers": 40})
W = TrainingWorkload(global_batch_size=256, seq_len=4096, framework="torchtitan")
SCHEDULES = {"1f1b": "1F1B", "gpipe": "GPipe", "interleaved-1f1b": "Interleaved1F1B"}


_CASES: dict[str, dict[str, Any]] = {}
_DONE: dict[str, dict[str, Any]] = {}


def _case(name: str, toml: str, world_size: int) -> None:
    _CASES[name] = {"toml": toml, "world_size": world_size}


def outcome(name: str) -> dict[str, Any]:
    """torchtitan's answer for one registered case; every case registered so far goes to torchtitan in one process
    (torch imports once)."""
    if name not in _DONE:
        todo = {k: v for k, v in _CASES.items() if k not in _DONE}
        _DONE.update(check("torchtitan", {"cases": todo}, timeout=1800))
    return _DONE[name]


def parsed_case(name: str) -> dict[str, Any]:
    out = outcome(name)
    if not out["ok"]:
        raise Rejected(out["error"])
    result: dict[str, Any] = out["result"]
    return result


def parsed(model: ModelSpec, w: TrainingWorkload, c: ParallelConfig) -> dict[str, Any]:
    e = export("torchtitan", model, w, c)
    name = e.content + str(c.gpus)
    if name not in _DONE:
        _case(name, e.content, c.gpus)
    return parsed_case(name)


def assert_as_priced(r: dict[str, Any], model: ModelSpec, w: TrainingWorkload, c: ParallelConfig) -> None:
    """What torchtitan parsed is the priced configuration and workload."""
    assert (r["tp"], r["pp"], r["cp"], r["ep"]) == (c.tp, c.pp, c.cp, c.ep)
    assert r["dp_replicate"] * r["dp_shard"] == c.dp
    if c.zero_stage == 0:  # DDP: nothing sharded, and only where torchtitan runs DDP (alone)
        assert (r["dp_replicate"], r["dp_shard"], r["fsdp_enabled"]) == (c.dp, 1, False)
        assert c.dp == 1 or r["ddp_alone"]
    else:  # FSDP2 over the shard group (HSDP) or the whole data-parallel group
        assert r["dp_shard"] == (c.shard_group or c.dp) and r["dp_replicate"] == c.state_replicas
        assert r["fsdp_enabled"] or c.dp == 1
        assert r["reshard"] == ("always" if c.zero_stage == 3 else "never")
    if c.ep > 1:
        assert r["etp"] == c.expert_tp
    assert r["async_tp"] == (c.tp_comm_overlap and c.tp > 1)
    assert ("model" in r["compile_components"]) == r["async_tp"]
    assert r["ac_mode"] == c.recompute and (c.recompute != "selective" or r["ac_option"] == "op")
    assert (r["global_batch"], r["seq_len"]) == (w.global_batch_size, w.seq_len)
    assert w.seq_len % r["seq_len_divisor"] == 0
    micro = r["microbatch"] if c.pp > 1 else r["local_batch"]
    assert micro == c.mbs  # the activations priced are one micro-batch of mbs sequences
    steps = w.global_batch_size // (r["local_batch"] * c.dp)
    assert steps * (r["local_batch"] // micro) == w.global_batch_size // (c.dp * c.mbs)
    assert (r["param_dtype"], r["reduce_dtype"]) == ("bfloat16", "float32")
    fp8 = w.precision == "fp8"
    assert ("quantize.linear.float8" in r["converters"]) == fp8
    if c.pp > 1:
        assert r["schedule"] == (SCHEDULES[c.schedule] if c.vp > 1 else "1F1B" if c.schedule != "gpipe" else "GPipe")
        layers = c.layers_per_stage or c.stage_layers(model.num_layers)
        chunks = [rank_chunks(c.pipeline_layout, c.pp, c.vp, rank, n) for rank, n in enumerate(layers)]
        assert r["layers_per_stage"] == [chunks[rank][k] for k in range(c.vp) for rank in range(c.pp)]
        assert r["stages"][0][0] == "tok_embeddings" and r["stages"][-1][-2:] == ["norm", "output"]
    m = r["model"]
    assert m["registered"], r["flavor"]
    assert (m["dim"], m["n_layers"], m["n_heads"], m["n_kv_heads"], m["ffn"], m["vocab"]) == shape(model)[:6]


PLANNED: dict[str, tuple[ModelSpec, str, tuple[str, ...]]] = {
    "8b-zero1-pp2": (L8, "dgx-h100:4", ("zero=1", "pp=2")),  # issue 53: the ZeRO-1 plan exported as DDP
    "70b-64": (L70, "dgx-h100:8", ()),
}


@functools.cache
def _planned(model: ModelSpec, cluster: str, pins: tuple[str, ...]) -> tuple[TrainingWorkload, ParallelConfig]:
    w = TrainingWorkload(global_batch_size=512, seq_len=4096, framework="torchtitan")
    space = SearchSpace(pins=parse_pins(list(pins)))
    result = plan(model, load_cluster_preset(cluster), w, space, top_k=1, time_limit_s=20)
    assert result.plan is not None, result.status
    return w, result.plan.config


@pytest.mark.parametrize("key", list(PLANNED))
def test_planned_torchtitan_plans_parse_as_priced(key: str) -> None:
    model = PLANNED[key][0]
    w, c = _planned(*PLANNED[key])
    assert_as_priced(parsed(model, w, c), model, w, c)


def test_zero1_under_pp_is_fsdp_not_ddp() -> None:
    """ZeRO-1 under PP priced sharded optimizer state: FSDP2 over dp, never replicate-only DDP."""
    c = ZERO1_PP
    r = parsed(L8, W, c)
    assert (r["dp_replicate"], r["dp_shard"], r["fsdp_enabled"], r["reshard"]) == (1, 4, True, "never")
    assert_as_priced(r, L8, W, c)


ZERO1_PP = ParallelConfig(tp=4, pp=2, dp=4, zero_stage=1, sequence_parallel=True)
HAND_BUILT = {
    "fsdp": ParallelConfig(dp=8, zero_stage=3, recompute="full"),
    "hsdp": ParallelConfig(tp=2, dp=16, zero_stage=3, shard_group=4, sequence_parallel=True),
    "hsdp-zero2": ParallelConfig(dp=16, zero_stage=2, shard_group=8),
    "ddp": ParallelConfig(dp=8, zero_stage=0, mbs=2),
    "zero2-no-reshard": ParallelConfig(dp=8, zero_stage=2, recompute="selective"),
    "pp-1f1b": ParallelConfig(pp=4, dp=2, zero_stage=1, mbs=2),
    "pp-gpipe": ParallelConfig(pp=2, dp=4, zero_stage=1, schedule="gpipe"),
    "pp-interleaved": ParallelConfig(pp=4, dp=2, vp=2, zero_stage=1, schedule="interleaved-1f1b"),
    "pp-uneven": ParallelConfig(pp=4, dp=2, zero_stage=1, layers_per_stage=[7, 9, 8, 8]),
    "cp": ParallelConfig(cp=2, dp=4, zero_stage=3, recompute="selective"),
    "tp-async": ParallelConfig(tp=4, dp=2, zero_stage=3, sequence_parallel=True, tp_comm_overlap=True),
    "tp-pp-cp": ParallelConfig(tp=2, pp=2, cp=2, dp=2, zero_stage=1, sequence_parallel=True, recompute="full"),
}


def _register_export(model: ModelSpec, w: TrainingWorkload, c: ParallelConfig) -> None:
    e = export("torchtitan", model, w, c)
    _case(e.content + str(c.gpus), e.content, c.gpus)


@pytest.fixture(scope="module", autouse=True)
def _register() -> None:
    """Every case of the module, so that the first test's call sends them all to torchtitan in one process (torch
    imports once: a process per test took a minute each)."""
    for c in (*HAND_BUILT.values(), ZERO1_PP):
        _register_export(L8, W, c)
    for recipe in ("tensorwise", "rowwise"):
        _register_export(L8, *_float8(recipe))
    _register_export(L8, W.model_copy(update={"fused_loss": True}), ParallelConfig(dp=8, zero_stage=3))
    _register_export(L8, W, ParallelConfig(dp=8, zero_stage=3))
    for key in PLANNED:
        _register_export(PLANNED[key][0], *_planned(*PLANNED[key]))
    toml = export("torchtitan", L8, W, ParallelConfig(dp=8, zero_stage=3)).content
    _case("wrong world", toml, 16)
    _case("float16", toml.replace('"bfloat16"', '"float16"'), 8)
    _case("custom", export("torchtitan", CUSTOM, W, ParallelConfig(dp=8, zero_stage=3)).content, 8)
    for f in FLAVORS:
        _case(f"flavor {f.name} {f.flavor}", f'[model]\nname = "{f.name}"\nflavor = "{f.flavor}"\n', 1)


def _float8(recipe: str) -> tuple[TrainingWorkload, ParallelConfig]:
    w = W.model_copy(update={"precision": "fp8", "fp8_recipe": recipe})
    return w, ParallelConfig(tp=2, dp=4, zero_stage=3, sequence_parallel=True, tp_comm_overlap=True)


@pytest.mark.parametrize("name", list(HAND_BUILT))
def test_hand_built_configurations_parse_as_priced(name: str) -> None:
    c = HAND_BUILT[name]
    assert_as_priced(parsed(L8, W, c), L8, W, c)


@pytest.mark.parametrize("recipe", ["tensorwise", "rowwise"])
def test_float8_is_the_priced_recipe(recipe: str) -> None:
    w, c = _float8(recipe)
    r = parsed(L8, w, c)
    assert r["converters"] == ["quantize.linear.float8"] and r["float8_recipe"] == recipe
    assert_as_priced(r, L8, w, c)


def test_fused_loss_compiles_the_loss() -> None:
    r = parsed(L8, W.model_copy(update={"fused_loss": True}), ParallelConfig(dp=8, zero_stage=3))
    assert r["compile"] and r["compile_components"] == ["loss"]
    assert not parsed(L8, W, ParallelConfig(dp=8, zero_stage=3))["compile"]


@pytest.mark.parametrize(
    ("w", "c", "field"),
    [
        (W, ParallelConfig(dp=8, zero_stage=1), "export.zero"),  # optimizer-only sharding without PP
        (W, ParallelConfig(tp=2, dp=4, zero_stage=0), "export.zero"),  # DDP beside TP
        (W, ParallelConfig(pp=2, dp=4, zero_stage=0), "export.zero"),  # DDP beside PP
        (W, ParallelConfig(cp=2, dp=4, zero_stage=0), "export.zero"),  # cp shards with FSDP anyway
        (W, ParallelConfig(pp=2, dp=4, zero_stage=1, schedule="zb-h1"), "export.schedule"),
        (W.model_copy(update={"precision": "fp16"}), ParallelConfig(dp=8, zero_stage=3), "export.precision"),
        (W.model_copy(update={"grad_dtype": "bf16"}), ParallelConfig(dp=8, zero_stage=3), "export.grad_dtype"),
    ],
    ids=["zero1-no-pp", "ddp-tp", "ddp-pp", "ddp-cp", "zb-h1", "fp16", "bf16-reduce"],
)
def test_what_torchtitan_cannot_express_is_refused_naming_the_knob(
    w: TrainingWorkload, c: ParallelConfig, field: str
) -> None:
    with pytest.raises(DomainError) as exc:
        export("torchtitan", L8, w, c)
    assert exc.value.field == field


def test_torchtitan_refuses_what_it_cannot_run() -> None:
    """The check can fail: torchtitan's own ParallelDims refuses a product that is not the world size, its config
    types refuse float16."""
    with pytest.raises(Rejected, match="WORLD_SIZE"):
        parsed_case("wrong world")
    with pytest.raises(Rejected, match="mixed"):
        parsed_case("float16")


def test_flavor_table_is_the_pinned_registry() -> None:
    for f in FLAVORS:
        got = parsed_case(f"flavor {f.name} {f.flavor}")["model"]
        assert got["registered"], f
        built = (got["dim"], got["n_layers"], got["n_heads"], got["n_kv_heads"], got["ffn"], got["vocab"])
        built += (got["head_dim"], got["experts"], got.get("top_k", 0), got.get("expert_ffn", 0))
        assert built == flavor_shape(f), f


def test_an_unregistered_shape_names_the_flavor_to_register() -> None:
    e = export("torchtitan", CUSTOM, W, ParallelConfig(dp=8, zero_stage=3))
    assert 'flavor = "meshplan-llama-3-8b-deep"' in e.content
    assert any("n_layers=40" in n and "llama3/__init__.py" in n for n in e.notes)
    r = parsed_case("custom")
    assert r["model"] == {"registered": False}  # torchtitan would not train some other model silently
