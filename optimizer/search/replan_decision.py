"""What a watch's re-plan decided about the layout it runs (issue 38 §3): kept, switched or shrunk, and why."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from optimizer.spec.parallel_config import ParallelConfig

Outcome = Literal["kept", "switched", "shrunk"]
OUTCOMES: tuple[Outcome, ...] = ("kept", "switched", "shrunk")
# A watch's default switch threshold, percent: a new layout must be predicted this much faster than the running
# one, besides its 80% difference interval lying above 1 [issue 38 §3: "default 5%"].
DEFAULT_SWITCH_THRESHOLD_PCT = 5.0


class ReplanDecision(BaseModel):
    """Keep the running layout, switch to the new optimum, or shrink the running layout's dp to what still fits."""

    outcome: Outcome = Field(
        description="kept: the running layout stays; switched: the new search's optimum replaces it; shrunk: the "
        "running layout with fewer data-parallel replicas (it no longer fit; the reshaped optimum was not "
        "significantly faster)."
    )
    text: str = Field(description="The decision in one sentence, e.g. 'kept: gain 1.2% (interval -3..+5%)'.")
    config: ParallelConfig = Field(description="The layout to run from now on.")
    gain: float | None = Field(
        default=None,
        description="Predicted gain of the new optimum over the layout it was weighed against (the running one, or "
        "its shrunk form): t_that / t_new - 1, a fraction; None when nothing it could be weighed against fits.",
    )
    gain_interval: tuple[float, float] | None = Field(
        default=None, description="80% interval of the true gain (difference_interval of the ratio, minus 1)."
    )
    threshold_pct: float = Field(description="The watch's switch threshold, percent.")
    running_step_time_s: float | None = Field(
        default=None, description="The running layout re-estimated on the new inventory, seconds; None: no longer fits."
    )
    new_step_time_s: float = Field(description="The new search's optimum, seconds per step.")
    no_longer_fits: str | None = Field(
        default=None, description="Why the running layout no longer fits, if it does not."
    )
