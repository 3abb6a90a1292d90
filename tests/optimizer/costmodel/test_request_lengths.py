"""Named datasets' length distributions (optimizer/costmodel/request_lengths.py, issue 55 §1): each table gives back
the statistics its source publishes, a draw reproduces the table and is scaled to the workload's means, and the
synthetic datasets are drawn as vLLM's benchmark draws them."""

from __future__ import annotations

import typing

import numpy as np
import pytest

from optimizer.costmodel import request_lengths as rl
from optimizer.errors import DomainError
from optimizer.spec.workload import InferenceWorkload
from optimizer.spec.workload_trace import LengthDistribution

MEDIAN, P90 = rl.QUANTILES.index(50), rl.QUANTILES.index(90)


def test_sarathi_serve_table_3_sharegpt_figures() -> None:
    """Sarathi-Serve (OSDI'24) Table 3, openchat_sharegpt4: prompt median 1730, P90 5696; output median 415, P90 834."""
    t = rl.OPENCHAT_SHAREGPT4
    assert (t.prompt[MEDIAN], t.prompt[P90], t.output[MEDIAN], t.output[P90]) == (1730, 5696, 415, 834)


def test_splitwise_medians() -> None:
    """Splitwise (ISCA'24): conversation medians 1020 prompt / 129 output tokens; coding 1500 / 13."""
    conv, code = rl.AZURE_CONV_2023, rl.AZURE_CODE_2023
    assert (conv.prompt[MEDIAN], conv.output[MEDIAN]) == (1020, 129)
    assert code.prompt[MEDIAN] == pytest.approx(1500, rel=0.03) and code.output[MEDIAN] == 13


def test_vllm_sharegpt_filter_holds_on_its_table() -> None:
    """`sharegpt` is the trace kept by vLLM's is_valid_sequence: every prompt within 4..1024, every output >= 4."""
    t = rl.SHAREGPT
    assert min(t.prompt) >= rl.VLLM_SHAREGPT_MIN_LEN and max(t.prompt) <= rl.VLLM_SHAREGPT_MAX_PROMPT
    assert min(t.output) >= rl.VLLM_SHAREGPT_MIN_LEN and max(t.output) <= rl.VLLM_SHAREGPT_MAX_TOTAL
    assert all(np.diff(t.prompt) >= 0) and all(np.diff(t.output) >= 0)


@pytest.mark.parametrize("name", sorted(rl.TABLES))
def test_a_draw_reproduces_its_table_and_is_scaled_to_the_means(name: str) -> None:
    t = rl.TABLES[name]
    rng = np.random.default_rng(7)
    # Scaled to the table's own means, a draw is the table: its median and P90 within 3% of the table's.
    p, o = rl.draw_lengths(name, rng, 200_000, round(t.mean("prompt")), round(t.mean("output")))
    for got, table in ((p, t.prompt), (o, t.output)):
        assert np.median(got) == pytest.approx(table[MEDIAN], rel=0.03, abs=1)
        assert np.percentile(got, 90) == pytest.approx(table[P90], rel=0.03, abs=1)
    # At a workload's means: those means, the table's spread.
    p, o = rl.draw_lengths(name, rng, 200_000, 217, 201)
    assert p.mean() == pytest.approx(217, rel=0.02) and o.mean() == pytest.approx(201, rel=0.02)
    assert p.std() / p.mean() == pytest.approx(t.cv("prompt"), rel=0.05)
    assert min(p.min(), o.min()) >= 1


def test_random_is_vllms_uniform_range_and_fixed_by_default() -> None:
    rng = np.random.default_rng(3)
    p, o = rl.draw_lengths("random", rng, 1000, 1024, 128)
    assert set(p) == {1024} and set(o) == {128}  # --random-range-ratio 0.0 (vLLM's default)
    wide = rl._vllm_random(rng, 100_000, 1000, 0.5)
    assert wide.min() == 500 and wide.max() == 1500 and wide.mean() == pytest.approx(1000, rel=0.01)
    s_p, s_o = rl.draw_lengths("sonnet", rng, 10, 550, 150)
    assert set(s_p) == {550} and set(s_o) == {150}


def test_the_names_the_workload_accepts_are_the_datasets() -> None:
    assert set(typing.get_args(LengthDistribution)) == set(rl.DATASETS)
    with pytest.raises(DomainError, match="length_distribution"):
        rl.check_dataset("lmsys-chat-1m")  # left out: its paper publishes means only


def test_spreads_follow_the_lengths_source() -> None:
    plain = InferenceWorkload(prompt_len=200, output_len=100, prompt_len_cv=0.3)
    assert rl.length_spreads(plain) == (0.3, 0.0)
    named = InferenceWorkload(prompt_len=200, output_len=100, length_distribution="sharegpt")
    assert rl.length_spreads(named) == (rl.SHAREGPT.cv("prompt"), rl.SHAREGPT.cv("output"))
    assert rl.length_spreads(named.model_copy(update={"length_distribution": "random"})) == (0.0, 0.0)
