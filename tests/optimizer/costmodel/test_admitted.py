"""Runs that ran are admitted [issue 33 §4]: the published Llama 3.1 405B layout on 512 H100 fits with NeMo's
recipe knobs, and where the model predicts an overrun for a configuration that ran, the estimate states it."""

from __future__ import annotations

import pytest

from optimizer.costmodel.estimate import estimate
from optimizer.costmodel.memory import state_bytes_per_param
from optimizer.spec.cluster_loading import load_cluster_preset
from optimizer.spec.model_loading import load_model_preset
from optimizer.spec.workload import TrainingWorkload
from tests.optimizer.helpers import llama405b_h100_512

MODEL = load_model_preset("llama-3.1-405b")
H100_512 = load_cluster_preset("dgx-h100:64")
# NeMo's performance recipe (scripts/performance/helpers.py set_precision_configs at 830b06a, the commit NeMo
# 25.07.01 ran in DGX Cloud Benchmarking): grad_reduce_in_fp32=False, and for BF16 the precision-aware optimizer.
NEMO_BF16 = TrainingWorkload(
    global_batch_size=256, seq_len=8192, grad_dtype="bf16", precision_aware_optimizer=True, framework="megatron"
)
NEMO_FP8 = TrainingWorkload(
    global_batch_size=256, seq_len=8192, precision="fp8", grad_dtype="bf16", fp8_param_gather=True
)
# Megatron-LM's own default: fp32 main grads (no --grad-reduce-in-bf16), no precision-aware optimizer.
MEGATRON_DEFAULT = TrainingWorkload(global_batch_size=256, seq_len=8192)


@pytest.mark.parametrize("workload", [NEMO_BF16, NEMO_FP8], ids=["bf16", "fp8"])
def test_405b_published_layout_fits_with_nemo_recipe_knobs(workload: TrainingWorkload) -> None:
    est = estimate(MODEL, H100_512, workload, llama405b_h100_512())
    assert est.feasible and est.memory_overrun_gb is None, [s.memory_gb.total for s in est.stages]
    assert est.step_time_s > 0 and not est.admitted


def test_precision_aware_optimizer_keeps_master_remainders() -> None:
    """TE FusedAdam store_param_remainders: an int16 beside each bf16 weight instead of an fp32 master copy."""
    assert sum(state_bytes_per_param(1, 8, 2, False, remainders=True)) == pytest.approx(2 + 2 + 10 / 8)
    plain = estimate(
        MODEL, H100_512, NEMO_BF16.model_copy(update={"precision_aware_optimizer": False}), llama405b_h100_512()
    )
    aware = estimate(MODEL, H100_512, NEMO_BF16, llama405b_h100_512())
    s_plain, s_aware = plain.stages[1].memory_gb, aware.stages[1].memory_gb
    assert s_aware.optimizer == pytest.approx(s_plain.optimizer * 10 / 12)
    assert s_aware.total < s_plain.total - 1.0  # 1.6 GB on a 16-layer stage of 405B at dp x cp = 8
    with pytest.raises(ValueError, match=r"workload\.precision_aware_optimizer"):  # a DomainError inside pydantic's
        TrainingWorkload(global_batch_size=256, seq_len=8192, precision="fp8", precision_aware_optimizer=True)


def test_a_run_that_ran_states_the_overrun_instead_of_refusing() -> None:
    """With Megatron's default fp32 main grads the model puts stage 1 above 80 GiB: an estimate for a run reported
    as run carries its step time and the overrun (worst stage, predicted peak minus the GPU's memory)."""
    cfg = llama405b_h100_512()
    plain = estimate(MODEL, H100_512, MEGATRON_DEFAULT, cfg)
    ran = estimate(MODEL, H100_512, MEGATRON_DEFAULT, cfg, admit=True)
    worst = max(s.memory_gb.total - s.memory_gb.capacity for s in ran.stages)
    assert not plain.feasible and not plain.admitted and "needs" in (plain.reason or "")
    assert plain.memory_overrun_gb == pytest.approx(worst)  # stated on every estimate that does not fit
    assert ran.admitted and not ran.feasible and ran.step_time_s == plain.step_time_s > 0
    assert ran.memory_overrun_gb == pytest.approx(worst) and 5 < worst < 12
    assert ran.reason is not None and ran.reason.startswith("reported as run") and f"{worst:.1f} GB" in ran.reason
    assert any("Reported as run" in n for n in ran.notes)
    fits = estimate(MODEL, H100_512, NEMO_BF16, cfg, admit=True)
    assert fits.admitted and fits.feasible and fits.memory_overrun_gb is None and fits.reason is None
