"""A sharding group exports as each framework's own setting: torchtitan's replicate x shard degrees, DeepSpeed's
mics_shard_size / zero_hpz_partition_size, Megatron's --num-distributed-optimizer-instances."""

from __future__ import annotations

import json
import tomllib
from importlib import resources

import pytest

from optimizer.errors import DomainError
from optimizer.exports.launch import export
from optimizer.spec.model_loading import load_model_preset
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import TrainingWorkload

REGISTRY = json.loads((resources.files("optimizer.exports") / "export_options.json").read_text())
MODEL = load_model_preset("llama-3-8b")
W = TrainingWorkload(global_batch_size=64, seq_len=4096)


def _documented(tool: str, options: list[str]) -> None:
    assert set(options) <= set(REGISTRY[tool]["options"])


def test_torchtitan_hsdp_degrees() -> None:
    e = export("torchtitan", MODEL, W, ParallelConfig(tp=2, dp=16, zero_stage=3, shard_group=4))
    par = tomllib.loads(e.content)["parallelism"]
    assert (par["data_parallel_replicate_degree"], par["data_parallel_shard_degree"]) == (4, 4)
    assert par["fsdp_reshard_after_forward"] == "always"  # ZeRO-3: every unit resharded after its forward
    _documented("torchtitan", e.options)
    zero2 = export("torchtitan", MODEL, W, ParallelConfig(tp=2, dp=16, zero_stage=2, shard_group=8))
    par2 = tomllib.loads(zero2.content)["parallelism"]
    assert (par2["data_parallel_replicate_degree"], par2["data_parallel_shard_degree"]) == (2, 8)
    assert par2["fsdp_reshard_after_forward"] == "never"
    _documented("torchtitan", zero2.options)
    plain = tomllib.loads(export("torchtitan", MODEL, W, ParallelConfig(dp=16, zero_stage=3)).content)["parallelism"]
    assert (plain["data_parallel_replicate_degree"], plain["data_parallel_shard_degree"]) == (1, 16)


# MiCS is in DeepSpeed up to 0.19.6 (0.19.7 refuses mics_shard_size); hpZ in every release the export targets.
DS_0196 = TrainingWorkload(global_batch_size=64, seq_len=4096, framework="deepspeed", framework_version="0.19.6")


@pytest.mark.parametrize(("scope", "key"), [("states", "mics_shard_size"), ("weights", "zero_hpz_partition_size")])
def test_deepspeed_mics_and_hpz(scope: str, key: str) -> None:
    e = export("deepspeed", MODEL, DS_0196, ParallelConfig(dp=32, zero_stage=3, shard_group=8, shard_scope=scope))
    zero = json.loads(e.content)["zero_optimization"]
    assert zero[key] == 8 and zero["stage"] == 3
    (other,) = {"mics_shard_size", "zero_hpz_partition_size"} - {key}
    assert other not in zero  # MiCS and hpZ are different partitionings: the plan sets one
    _documented("deepspeed", e.options)


def test_deepspeed_mics_is_refused_where_deepspeed_removed_it() -> None:
    # unstated: the newest release (0.19.8), whose config class refuses the key (tests/frameworks/test_deepspeed.py)
    for w in (W, DS_0196.model_copy(update={"framework_version": "0.19.7"})):
        with pytest.raises(DomainError) as exc:
            export("deepspeed", MODEL, w, ParallelConfig(dp=32, zero_stage=3, shard_group=8))
        assert exc.value.field == "export.shard_group" and "removed in 0.19.7" in exc.value.rule


def test_megatron_distributed_optimizer_instances() -> None:
    e = export("megatron", MODEL, W, ParallelConfig(tp=2, dp=16, zero_stage=1, shard_group=4))
    assert "--num-distributed-optimizer-instances 4" in e.content and "--use-distributed-optimizer" in e.content
    _documented("megatron", e.options)
    plain = export("megatron", MODEL, W, ParallelConfig(tp=2, dp=16, zero_stage=1))
    assert "--num-distributed-optimizer-instances" not in plain.content


def test_a_framework_that_cannot_run_the_group_is_an_error_naming_it() -> None:
    with pytest.raises(DomainError) as exc:
        export("deepspeed", MODEL, W, ParallelConfig(tp=2, dp=16, zero_stage=3, shard_group=4))
    assert exc.value.field == "export.shard_group"
    with pytest.raises(DomainError) as exc:
        export("megatron", MODEL, W, ParallelConfig(dp=32, zero_stage=3, shard_group=8, shard_scope="weights"))
    assert exc.value.field == "export.shard_scope"
