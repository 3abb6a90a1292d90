"""The pipeline timeline reproduces the schedules' bubble formulas."""

from __future__ import annotations

import pytest

from optimizer.exports.timeline import simulate


@pytest.mark.parametrize(("p", "m"), [(2, 4), (4, 8), (8, 16), (4, 3)])
def test_1f1b_and_gpipe_bubble_is_p_minus_1_over_m_plus_p_minus_1(p: int, m: int) -> None:
    for schedule in ("1f1b", "gpipe"):
        t = simulate(schedule, [1.0] * p, [2.0] * p, m)
        assert t.bubble_fraction == pytest.approx((p - 1) / (m + p - 1))
        assert len(t.blocks) == 2 * p * m and t.makespan_s == pytest.approx(3.0 * (m + p - 1))


@pytest.mark.parametrize(("p", "m", "vp"), [(4, 8, 2), (4, 8, 4), (2, 6, 3)])
def test_interleaving_divides_the_bubble_by_vp(p: int, m: int, vp: int) -> None:
    t = simulate("interleaved-1f1b", [1.0] * p, [2.0] * p, m, vp)
    assert t.vp == vp and len(t.blocks) == 2 * p * m * vp
    assert t.bubble_fraction == pytest.approx((p - 1) / (vp * m + p - 1))


def test_1f1b_keeps_at_most_p_minus_s_microbatches_in_flight() -> None:
    p, m = 4, 12
    t = simulate("1f1b", [1.0] * p, [2.0] * p, m)
    for s in range(p):
        ops = sorted((b for b in t.blocks if b.stage == s), key=lambda b: b.start_s)
        live = peak = 0
        for b in ops:
            live += 1 if b.kind == "F" else -1
            peak = max(peak, live)
        assert peak == min(p - s, m)


def test_long_steps_are_drawn_as_a_prefix() -> None:
    t = simulate("interleaved-1f1b", [1.0] * 8, [2.0] * 8, 512, 2, max_microbatches=64)
    assert t.microbatches == 64 and t.truncated_from == 512 and t.stages == 8
