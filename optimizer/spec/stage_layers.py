"""Layer counts per pipeline rank and their split over the rank's virtual stages: the one source of these rules
for the stage model, the oracle, the candidate bounds, validation, the memory model and the exports.

Megatron-Core runs any number of decoder layers per virtual stage (`--pipeline-model-parallel-layout`, empty
stages allowed: megatron/core/transformer/pipeline_parallel_layer_layout.py, docs/user-guide/features/
pipeline_parallel_layout.md) and torchtitan any module list per model part (`module_fqns_per_model_part`,
torchtitan/distributed/pipeline_parallel.py). Frameworks without such a layout split each rank's layers evenly
over its virtual stages, so a rank holds a multiple of vp layers.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator
from dataclasses import dataclass

from optimizer.spec.model_spec import ModelSpec


@functools.cache
def _admits(rules: LayerRules) -> bool:
    """Ranks after the first each take whole steps from their fewest up, so together they take every multiple of
    the step from the sum of their fewest up: some count of rank 0 must leave such a remainder."""
    rest = sum(rules._least_rounded(r) for r in range(1, rules.pp))
    return any((rules.num_layers - x) % rules.step == 0 and rules.num_layers - x >= rest for x in rules.first_counts())


def virtual_split(layers: int, vp: int) -> list[int]:
    """How a rank's `layers` split over its `vp` virtual stages (chunk 0 first): as even as possible, the
    smaller chunks first. Chunk 0 has the most micro-batches in flight under Megatron's interleaved schedule
    (see chunk_inflight_counts), so this split holds the fewest activations; on the first rank chunk 0 also
    carries the embedding, the layout Megatron's `--account-for-embedding-in-pipeline-split` produces."""
    base, extra = divmod(layers, vp)
    return [base] * (vp - extra) + [base + 1] * extra


@functools.lru_cache(maxsize=65536)
def chunk_inflight_counts(pp: int, vp: int, stage: int, microbatches: int, extra: int = 0) -> tuple[int, ...]:
    """Micro-batches each of rank `stage`'s chunks holds at the rank's activation peak under the interleaved
    schedule: the warm-up of (p - r - 1) x 2 + (v - 1) x p forwards plus the one in flight, capped at m x v
    [MLM schedules.py get_pp_rank_microbatches]; forward k runs chunk (k // p) mod v, micro-batches taken in
    groups of p per chunk [MLM schedules.py get_schedule_table, microbatch_group_size_per_vp_stage = pp]."""
    n = min((pp - stage - 1) * 2 + (vp - 1) * pp + extra + 1, microbatches * vp)
    rounds, rest = divmod(n, pp * vp)  # whole rounds of p forwards per chunk, then a partial one
    return tuple(rounds * pp + min(max(rest - k * pp, 0), pp) for k in range(vp))


@dataclass(frozen=True, slots=True)
class LayerRules:
    """Which layer counts each pipeline rank may hold for one (model, pp, vp, framework)."""

    num_layers: int
    """Decoder layers of the model."""
    pp: int
    """Pipeline ranks."""
    vp: int
    """Virtual stages per rank."""
    flexible: bool
    """Layers per virtual stage may differ (a custom layout); otherwise every chunk of a rank is equal."""
    first_k_dense: int
    """Leading dense layers of an MoE model that stay on rank 0 (0 when pp = 1 or dense)."""
    period: int
    """MoE layer period: ranks after the first hold whole periods, so each rank's dense / MoE mix follows from
    its layer count (1 when pp = 1 or dense)."""

    @classmethod
    def of(cls, model: ModelSpec, pp: int, vp: int, flexible: bool) -> LayerRules:
        moe = model.moe
        return cls(
            num_layers=model.num_layers,
            pp=pp,
            vp=vp,
            flexible=flexible or vp == 1,
            first_k_dense=moe.first_k_dense if moe is not None and pp > 1 else 0,
            period=moe.layer_freq if moe is not None and pp > 1 else 1,
        )

    @property
    def step(self) -> int:
        """Ranks after the first hold multiples of this."""
        unit = 1 if self.flexible else self.vp
        return unit * self.period // math.gcd(unit, self.period)

    def least(self, rank: int) -> int:
        """The fewest layers rank `rank` holds. Every virtual stage holds at least one layer, except that the first
        rank's first stage may hold only the embedding and the last rank's last stage only the loss (Megatron's
        layout 'E|...' / '...|L'; Meta's 405B: 7 layers on the first and last of 16 ranks [DU §3.3.2]); without a
        layout every chunk of a rank is equal, so a rank holds at least vp."""
        if not self.flexible:
            return self.vp
        ends = (rank == 0) + (rank == self.pp - 1)
        return max(1, self.vp - ends)

    def _counts(self, rank: int, rest_least: int) -> list[int]:
        lo = self.least(rank)
        hi = self.num_layers - rest_least
        if rank == 0:
            unit = 1 if self.flexible else self.vp
            return [
                x
                for x in range(unit * -(-lo // unit), hi + 1, unit)
                if x >= self.first_k_dense and (x - self.first_k_dense) % self.period == 0
            ]
        return list(range(self.step * -(-lo // self.step), hi + 1, self.step))

    def _least_rounded(self, rank: int) -> int:
        """The fewest layers rank `rank` > 0 holds on whole steps."""
        return self.step * -(-self.least(rank) // self.step)

    def first_counts(self) -> list[int]:
        """Layer counts rank 0 may hold."""
        if self.pp == 1:
            return [self.num_layers]
        return self._counts(0, sum(self._least_rounded(r) for r in range(1, self.pp)))

    def other_counts(self) -> list[int]:
        """Layer counts a middle rank (0 < r < pp - 1) may hold."""
        others = self.least(0) + sum(self._least_rounded(r) for r in range(2, self.pp))
        return self._counts(1, others) if self.pp > 2 else []

    def last_counts(self) -> list[int]:
        """Layer counts the last rank may hold (pp > 1)."""
        others = self.least(0) + (self.pp - 2) * self._least_rounded(1)
        return self._counts(self.pp - 1, others)

    def counts(self, rank: int) -> tuple[int, ...]:
        """Layer counts rank `rank` may hold (memoised: every stage table of every candidate asks)."""
        return _counts_of(self, 0 if rank == 0 else 2 if rank == self.pp - 1 else 1)

    def splits(self) -> Iterator[list[int]]:
        """Every split of the layers over the ranks that follows the rules (the exhaustive oracles' layouts), in
        increasing order of the first ranks' counts."""

        def rest(remaining: int, rank: int) -> Iterator[list[int]]:
            if rank == self.pp:
                if remaining == 0:
                    yield []
                return
            for x in self.counts(rank):
                if x > remaining:
                    break
                for tail in rest(remaining - x, rank + 1):
                    yield [x, *tail]

        yield from rest(self.num_layers, 0)

    def admits(self) -> bool:
        """Whether any split of the layers over the ranks follows the rules."""
        if self.pp == 1:
            return True
        return _admits(self)

    def default_split(self) -> list[int] | None:
        """Layers per rank when the configuration gives none: even when pp divides the layers (and vp each
        rank's share, unless the layout is flexible); otherwise, where the framework takes a layout, the
        embedding and the loss count as one layer each and the rest is spread evenly, the split of Megatron's
        `--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split` and torchtitan's
        default `pipeline_parallel_first/last_stage_less_layers = 1` (Llama 3 405B: 126 layers over pp = 16
        as 7, 14 x 8, 7 [Llama 3 paper §3.3.2]). None when no split is admitted by default."""
        L, p = self.num_layers, self.pp
        if L % p == 0 and (self.flexible or (L // p) % self.vp == 0):
            return [L // p] * p
        if not self.flexible or p == 1:
            return None
        base, extra = divmod(L + 2, p)
        split = [base + (1 if 0 < i <= extra else 0) for i in range(p)]
        split[0] -= 1
        split[-1] -= 1
        if any(n < self.least(r) for r, n in enumerate(split)):
            base, extra = divmod(L, p)
            return [base + (1 if i < extra else 0) for i in range(p)]
        return split


@functools.lru_cache(maxsize=4096)
def _counts_of(rules: LayerRules, role: int) -> tuple[int, ...]:
    """LayerRules.counts by role: 0 the first rank, 1 a middle rank, 2 the last rank (pp > 1)."""
    if role == 0:
        return tuple(rules.first_counts())
    return tuple(rules.last_counts() if role == 2 else rules.other_counts())
