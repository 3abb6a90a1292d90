"""The serving quarantine draws each record's named dataset (issue 55 §1): a ShareGPT row's requests take ShareGPT's
length spread at the row's means, a random row (vLLM's fixed lengths) is priced as at its means, and `means`
prices every row as the model did before the distributions."""

from __future__ import annotations

from accuracy.serving_quarantine import load_quarantine, predict_quarantine, record_dataset


def _record(rid: str) -> dict[str, object]:
    _, records = load_quarantine()
    return next(r for r in records if r["id"] == rid)


def test_each_record_names_its_dataset_from_its_table() -> None:
    _, records = load_quarantine()
    names = {record_dataset(r) for r in records}
    assert names == {"sharegpt", "random"}
    assert record_dataset(_record("gs_q32_vllm_tp1_bf16_sharegpt")) == "sharegpt"
    assert record_dataset(_record("gs_dsr1_vllm_tp8_2k")) == "random"


def test_a_sharegpt_row_moves_and_a_random_row_does_not() -> None:
    sharegpt = _record("gs_q32_vllm_tp1_bf16_sharegpt")
    drawn = {c.metric: c.predicted for c in predict_quarantine(sharegpt)}
    means = {c.metric: c.predicted for c in predict_quarantine(sharegpt, "means")}
    assert drawn["output_tokens_per_s"] != means["output_tokens_per_s"]
    fixed = _record("gs_dsr1_vllm_tp8_2k")
    assert predict_quarantine(fixed) == predict_quarantine(fixed, "means")
