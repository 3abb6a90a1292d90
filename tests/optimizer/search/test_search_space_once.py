"""A job builds its training search space once per framework: the submission checks the specs alone
(check_request), and the search checks the pins against the space it solves over."""

from __future__ import annotations

import pytest

from optimizer.search import candidates, planner
from optimizer.spec.workload import TrainingWorkload
from tests.optimizer.search.test_planner import SMALL_SPACE, small_cluster, tiny_model


def _count_spaces(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    built: list[str] = []
    original = candidates.TrainingSpace.__init__

    def counting(self: candidates.TrainingSpace, *args: object, **kwargs: object) -> None:
        original(self, *args, **kwargs)  # type: ignore[arg-type]
        built.append(self.fw.name)

    monkeypatch.setattr(candidates.TrainingSpace, "__init__", counting)
    return built


@pytest.mark.parametrize(("framework", "expected"), [("megatron", ["megatron"]), ("auto", list(planner.FRAMEWORKS))])
def test_plan_builds_each_frameworks_space_once(
    monkeypatch: pytest.MonkeyPatch, framework: str, expected: list[str]
) -> None:
    built = _count_spaces(monkeypatch)
    w = TrainingWorkload(global_batch_size=8, seq_len=1024, framework=framework)  # type: ignore[arg-type]
    r = planner.plan(tiny_model(), small_cluster(80), w, SMALL_SPACE, time_limit_s=20, top_k=1, diagnose=False)
    assert r.plan is not None
    assert sorted(built) == sorted(expected)
