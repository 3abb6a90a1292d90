"""The software stack as an input (issue 45 §1): releases resolve to the nearest known one, a stated release's
defaults are priced, the novelty names the axes outside the fitted runs, and the fitted table matches the data."""

from __future__ import annotations

import json
from importlib import resources

import pytest
from typer.testing import CliRunner

from api.cli import app
from optimizer.costmodel.estimate import estimate
from optimizer.errors import DomainError
from optimizer.frameworks.releases import FITTED, RELEASES, parse_version, resolve_release, stack_novelty
from optimizer.spec.cluster_loading import resolve_cluster
from optimizer.spec.gpu_catalog import GPUSpec, resolve_gpu
from optimizer.spec.model_loading import resolve_model
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import TrainingWorkload
from optimizer.spec.workload_loading import build_training


def test_versions_resolve_to_the_nearest_known_release_at_or_before_them() -> None:
    assert resolve_release("megatron", "25.09").match == "exact"
    r = resolve_release("megatron", "25.10")
    assert (r.match, r.release.version if r.release else None) == ("nearest_older", "25.09")
    assert not r.newer_than_known
    newer = resolve_release("megatron", "27.02")
    assert newer.newer_than_known and newer.release is not None and newer.release.version == "26.08"
    assert resolve_release("megatron", "23.05").match == "oldest"
    assert resolve_release("torchtitan", None).match == "unstated"
    assert parse_version("v0.2.1rc1") == (0, 2, 1)


def test_a_megatron_core_version_resolves_through_the_containers_that_ship_it() -> None:
    """Megatron-Core 0.14.0 is NeMo 25.09's (Megatron-Bridge software-versions); an older core is not read as a
    container older than 24.03 (which would price FlashAttention-2) but as unmapped, with the current defaults."""
    assert (resolve_release("megatron", "core_r0.14.0").release or RELEASES[0]).version == "25.09"
    between = resolve_release("megatron", "0.16.2")
    assert between.match == "nearest_older" and between.release is not None and between.release.version == "26.02"
    old = resolve_release("megatron", "0.8.0")
    assert old.match == "core_unmapped" and old.release is None
    h100 = resolve_gpu("H100-SXM-80GB")
    assert stack_novelty("megatron", "0.8.0", h100, "bf16").names == ("release",)
    assert stack_novelty("megatron", "0.15.0", h100, "bf16").names == ()
    assert stack_novelty("megatron", "0.19.0", h100, "bf16").names == ("release",)  # newer than every known core


def test_every_release_is_dated_sourced_and_ordered() -> None:
    for r in RELEASES:
        assert r.source and len(r.date) == 7 and r.date[4] == "-"
        assert 0.5 <= r.compute_factor <= 1.5


def test_a_stated_release_prices_its_default_attention_kernel() -> None:
    """NeMo 24.03 ran FlashAttention-2 class kernels: naming the container prices what attention_kernel fa2 does."""
    model, cluster = resolve_model("llama-3-8b"), resolve_cluster("dgx-h100:1")
    cfg = ParallelConfig(tp=1, dp=8, zero_stage=1, recompute="selective")

    def step(**kw: object) -> float:
        w = TrainingWorkload.model_validate({"global_batch_size": 64, "seq_len": 8192, **kw})
        return estimate(model, cluster, w, cfg).step_time_s

    fa2 = step(attention_kernel="fa2")
    assert step(framework_version="24.03") == pytest.approx(fa2, rel=1e-12)
    assert step(framework_version="24.12") == pytest.approx(step(), rel=1e-12)
    assert step(framework_version="24.03") > step(framework_version="24.12") * 1.02  # the kernel, not a no-op


def test_the_estimate_names_the_release_it_priced_and_its_novelty() -> None:
    model, cluster = resolve_model("llama-3-8b"), resolve_cluster("dgx-h100:1")
    cfg = ParallelConfig(tp=1, dp=8, zero_stage=1)
    inside = estimate(
        model, cluster, TrainingWorkload(global_batch_size=64, seq_len=4096, framework_version="26.02"), cfg
    )
    assert inside.stack is not None and inside.stack.priced_as == "26.02" and inside.stack.novelty == []
    w = TrainingWorkload(global_batch_size=64, seq_len=4096, framework_version="27.04")
    newer = estimate(model, cluster, w, cfg)
    assert newer.stack is not None and newer.stack.priced_as == "26.08"
    assert newer.stack.novelty_axes == ["release"]


def test_novelty_axes_per_framework_gpu_variant_and_precision() -> None:
    h100, nvl = resolve_gpu("H100-SXM-80GB"), resolve_gpu("H100-NVL-94GB")
    assert stack_novelty("megatron", None, h100, "bf16").names == ()
    assert stack_novelty("megatron", None, nvl, "bf16").names == ("gpu_variant",)
    assert stack_novelty("torchtitan", "0.2.1", h100, "fp8").names == ("release",)
    assert stack_novelty("torchtitan", "0.0.2", h100, "fp8").names == ()
    assert stack_novelty("torchtitan", None, h100, "fp16").names == ("precision",)
    assert stack_novelty("deepspeed", None, h100, "bf16").names == ("framework",)
    assert stack_novelty("megatron", "26.02", resolve_gpu("B200-180GB"), "fp8").names == ()


def test_the_fitted_table_matches_the_published_runs() -> None:
    text = resources.files("accuracy.data").joinpath("published_runs.json").read_text()
    records = json.loads(text)["records"]
    for f in FITTED:
        for group in f.groups:
            recs = [r for r in records if r["group"] == group]
            ours = []
            for r in recs:
                spec = r["cluster"].get("gpu_spec")
                gpu = GPUSpec.model_validate(spec) if spec else resolve_gpu(r["cluster"]["gpu_type"])
                if gpu.family == f.family:
                    ours.append(r)
                    assert gpu.name in f.gpus, r["id"]
                    assert (r.get("framework") or "megatron") == f.framework, r["id"]
                    if r.get("framework_version"):
                        assert r["framework_version"] in f.releases, r["id"]
            assert ours, (f.framework, f.family, group)


def test_a_malformed_release_or_one_without_a_framework_is_refused() -> None:
    with pytest.raises(DomainError) as exc:
        build_training(global_batch_size=8, seq_len=1024, framework_version="latest")
    assert exc.value.field == "workload.framework_version"
    with pytest.raises(DomainError) as exc:
        build_training(global_batch_size=8, seq_len=1024, framework="auto", framework_version="25.09")
    assert exc.value.field == "workload.framework_version"


def test_cli_prints_the_stack_and_refuses_a_bad_release() -> None:
    base = [
        "estimate",
        "--model",
        "llama-3-8b",
        "--cluster",
        "dgx-h100:1",
        "--gbs",
        "16",
        "--seq-len",
        "2048",
        "--tp",
        "8",
    ]
    ok = CliRunner().invoke(app, [*base, "--framework-version", "27.01"])
    assert ok.exit_code == 0, ok.output
    assert "priced as 26.08" in ok.output and "release:" in ok.output
    bad = CliRunner().invoke(app, [*base, "--framework-version", "new"])
    assert bad.exit_code == 2 and "workload.framework_version" in bad.output


def test_torchtitan_float8_recipe_follows_the_release_and_rowwise_is_slower() -> None:
    """torchtitan through 0.2.2 runs torchao's tensorwise recipe; rowwise (its default on main since 6348d93) runs
    its FP8 GEMMs at TORCHAO_ROWWISE_FP8_RATE of that (pytorch/ao float8 README: 6,768 vs 7,689.5 tok/s)."""
    model, cluster = resolve_model("llama-3-8b"), resolve_cluster("dgx-h100:1")
    cfg = ParallelConfig(tp=1, dp=8, zero_stage=3, recompute="selective")

    def step(**kw: object) -> float:
        base = {"global_batch_size": 8, "seq_len": 8192, "framework": "torchtitan", "framework_version": "0.0.2"}
        return estimate(model, cluster, TrainingWorkload.model_validate({**base, **kw}), cfg).step_time_s

    tensorwise = step(precision="fp8")
    assert step(precision="fp8", fp8_recipe="tensorwise") == pytest.approx(tensorwise, rel=1e-12)
    ratio = step(precision="fp8", fp8_recipe="rowwise") / tensorwise
    assert 1.05 < ratio < 1.25  # measured 7,689.5 / 6,768 = 1.136
    assert step() > tensorwise * 1.15  # bf16 slower than float8 (measured 1.25x)


def test_a_float8_recipe_needs_torchtitan_and_fp8() -> None:
    for kw in ({"precision": "bf16", "framework": "torchtitan"}, {"precision": "fp8", "framework": "megatron"}):
        with pytest.raises(DomainError) as exc:
            build_training(global_batch_size=8, seq_len=1024, fp8_recipe="rowwise", **kw)
        assert exc.value.field == "workload.fp8_recipe"
