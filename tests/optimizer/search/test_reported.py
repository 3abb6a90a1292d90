"""A configuration reported as run is planned as given [issue 33 §4]: the planner refuses it, its reported plan holds
it with its step time and the overrun the model predicts; a configuration that breaks a rule is refused naming the
field."""

from __future__ import annotations

import pytest

from optimizer.errors import DomainError
from optimizer.search.planner import plan
from optimizer.search.reported import REPORTED, reported_plan
from optimizer.search.space import SearchSpace, parse_pins
from optimizer.spec.cluster_loading import load_cluster_preset
from optimizer.spec.model_loading import load_model_preset
from optimizer.spec.workload import InferenceWorkload, TrainingWorkload
from tests.optimizer.helpers import llama405b_h100_512

MODEL = load_model_preset("llama-3.1-405b")
CLUSTER = load_cluster_preset("dgx-h100:64")
FP32_GRADS = TrainingWorkload(global_batch_size=256, seq_len=8192)


def test_the_planner_refuses_it_the_reported_plan_states_the_overrun() -> None:
    cfg = llama405b_h100_512()
    pins = parse_pins(["tp=8", "pp=8", "cp=2", "vp=8", "mbs=1", "recompute=none", "zero=1"])
    refused = plan(MODEL, CLUSTER, FP32_GRADS, SearchSpace(pins=pins), time_limit_s=10, diagnose=False)
    assert refused.status == "INFEASIBLE" and refused.plan is None
    r = reported_plan(MODEL, CLUSTER, FP32_GRADS, cfg)
    assert r.status == REPORTED and r.plan is not None and r.plan.config == cfg
    est = r.plan.estimate
    assert est.admitted and est.memory_overrun_gb is not None and est.memory_overrun_gb > 5
    assert r.objective_value == est.step_time_s > 0 and r.candidates_solved == 0
    assert "Reported as run" in r.explanation.summary and f"{est.memory_overrun_gb:.1f} GB" in r.explanation.summary
    assert r.explanation.binding[0].kind == "memory" and r.explanation.binding[0].share > 1


@pytest.mark.parametrize(
    ("workload", "update", "field"),
    [
        (FP32_GRADS, {"tp": 3}, "search.ran.tp"),  # 128 heads over tp 3
        (FP32_GRADS, {"dp": 8}, "search.ran"),  # 1,024 GPUs on a 512-GPU cluster
        (FP32_GRADS.model_copy(update={"framework": "auto"}), {}, "workload.framework"),
        (InferenceWorkload(prompt_len=128, output_len=128), {}, "search.ran"),
    ],
)
def test_a_reported_configuration_that_breaks_a_rule_names_the_field(
    workload: TrainingWorkload | InferenceWorkload, update: dict[str, int], field: str
) -> None:
    with pytest.raises(DomainError) as exc:
        reported_plan(MODEL, CLUSTER, workload, llama405b_h100_512().model_copy(update=update))
    assert exc.value.field.startswith(field), exc.value
