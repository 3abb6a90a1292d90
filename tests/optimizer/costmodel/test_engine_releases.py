"""The engine release is an input [issue 50 §3]: a known release's defaults as released; an unknown one priced as the
nearest with wider intervals; a malformed one refused naming the field."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from optimizer.costmodel.engine_releases import match_release
from optimizer.costmodel.estimate import estimate
from optimizer.costmodel.serving_engines import workload_limits
from optimizer.spec.cluster_loading import load_cluster_preset
from optimizer.spec.gpu_catalog import resolve_gpu
from optimizer.spec.model_loading import load_model_preset
from optimizer.spec.parallel_config import ParallelConfig
from optimizer.spec.workload import InferenceWorkload

H100 = resolve_gpu("H100-SXM-80GB")


def test_vllm_060_runs_the_v0_scheduler_and_v1_mixes() -> None:
    old = workload_limits(InferenceWorkload(prompt_len=256, output_len=256, engine_version="0.6.0"), H100, 1)
    new = workload_limits(InferenceWorkload(prompt_len=256, output_len=256, engine_version="0.11.0"), H100, 1)
    assert not old.mixes_prefill and old.max_seqs == 256 and old.graph_max_batch == 256
    assert new.mixes_prefill and new.max_seqs == 1024


def test_an_explicit_knob_beats_the_release_default() -> None:
    w = InferenceWorkload(prompt_len=256, output_len=256, engine_version="0.6.0", max_seqs=64)
    assert workload_limits(w, H100, 1).max_seqs == 64


@pytest.mark.parametrize(
    ("engine", "asked", "priced", "exact"),
    [("vllm", "0.11.0", "0.11.0", True), ("vllm", "v0.9.2", "0.8.0", False), ("sglang", "0.5.5.post1", "0.5.3", False)],
)
def test_nearest_release(engine: str, asked: str, priced: str, exact: bool) -> None:
    m = match_release(engine, asked)  # type: ignore[arg-type]
    assert (m.release.version, m.exact) == (priced, exact)


def test_an_unknown_release_widens_the_band_and_says_so() -> None:
    model, cluster = load_model_preset("llama-3-8b"), load_cluster_preset("dgx-h100")
    base = InferenceWorkload(prompt_len=512, output_len=128, batch=8)
    known = estimate(model, cluster, base.model_copy(update={"engine_version": "0.11.0"}), ParallelConfig(tp=1))
    novel = estimate(model, cluster, base.model_copy(update={"engine_version": "0.12.1"}), ParallelConfig(tp=1))
    assert known.tpot_interval_s is not None and novel.tpot_interval_s is not None
    assert novel.tpot_interval_s[1] - novel.tpot_interval_s[0] > 2 * (
        known.tpot_interval_s[1] - known.tpot_interval_s[0]
    )
    assert any("not in the release table" in n for n in novel.notes)


def test_a_malformed_release_names_the_field() -> None:
    with pytest.raises(ValidationError, match="engine_version"):
        InferenceWorkload(prompt_len=1, output_len=1, engine_version="latest")
