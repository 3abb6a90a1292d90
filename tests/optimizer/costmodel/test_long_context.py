"""Context parallelism up to what the sequence allows (issue 13): a cp=32 pin used to be rejected with a false
reason because the search only knew 1, 2, 4, 8 and 16."""

from __future__ import annotations

import pytest

from optimizer.costmodel.compute import flash_length_factor
from optimizer.errors import DomainError
from optimizer.search.candidates import TrainingSpace
from optimizer.search.planner import plan
from optimizer.search.space import SearchSpace, parse_pins
from optimizer.spec.cluster_loading import load_cluster_preset
from optimizer.spec.model_loading import load_model_preset
from optimizer.spec.workload import TrainingWorkload

W = TrainingWorkload(global_batch_size=64, seq_len=262144)


def test_cp_pin_beyond_sixteen_is_planned() -> None:
    model, cluster = load_model_preset("llama-3-8b"), load_cluster_preset("dgx-h100:64")
    res = plan(model, cluster, W, SearchSpace(pins=parse_pins(["cp=32", "tp=8"])), time_limit_s=30)
    assert res.status == "OPTIMAL" and res.plan is not None and res.plan.config.cp == 32


def test_cp_pin_that_does_not_split_the_sequence_names_the_rule() -> None:
    model, cluster = load_model_preset("llama-3-8b"), load_cluster_preset("dgx-h100:64")
    with pytest.raises(DomainError) as exc:
        plan(model, cluster, W, SearchSpace(pins=parse_pins(["cp=3"])), time_limit_s=5)
    assert exc.value.field == "pin.cp" and "seq_len % (2 x cp)" in exc.value.rule


def test_default_cp_degrees_are_every_divisor_with_enough_tokens() -> None:
    model, cluster = load_model_preset("llama-3-8b"), load_cluster_preset("dgx-h100:64")
    values = TrainingSpace(model, cluster, W, SearchSpace()).cp_values()
    assert values == [1, 2, 4, 8, 16, 32, 64, 128, 256]  # at least 1,024 of the 262,144 tokens per rank
    short = TrainingSpace(model, cluster, TrainingWorkload(global_batch_size=64, seq_len=98304), SearchSpace())
    assert 3 in short.cp_values() and 96 in short.cp_values()  # not only powers of two


def test_ring_attention_pays_for_short_blocks() -> None:
    """Fused attention slows on short sequences (FlashAttention-3 Fig. 5): ring CP at 4K tokens runs each rank's
    attention as s/cp and s/2cp blocks, far below the kernel's speed on the whole sequence, while at 128K its
    unmasked blocks run faster than the causal reference."""
    assert flash_length_factor("fa3", 4096, 4) < 0.85 * flash_length_factor("fa3", 4096, 1)
    assert flash_length_factor("fa3", 131072, 4) >= flash_length_factor("fa3", 131072, 1)
    assert flash_length_factor("fa3", 2048) < flash_length_factor("fa3", 8192) == pytest.approx(1.0)


def test_llama2_70b_at_4k_keeps_context_whole_as_nvidia_does() -> None:
    """NVIDIA's Llama-2-70B recipe on 64 H100 at 4K tokens is TP 4, PP 4, no CP (NeMo performance summary 24.12);
    with ring CP priced at full kernel speed the planner picked cp 4 instead."""
    model, cluster = load_model_preset("llama-2-70b"), load_cluster_preset("dgx-h100:8")
    res = plan(model, cluster, TrainingWorkload(global_batch_size=128, seq_len=4096), time_limit_s=60)
    assert res.status == "OPTIMAL" and res.plan is not None
    assert res.plan.config.cp == 1 and res.plan.config.tp <= 8
