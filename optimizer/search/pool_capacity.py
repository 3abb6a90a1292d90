"""The pool-capacity constraint family, shared by the training and serving stage models: each stage takes
`gpus_per_stage` healthy GPUs of the pool it runs on, and a pool has no more than it has [inventory]."""

from __future__ import annotations

from collections.abc import Sequence

from optimizer.search.cpsat import cp_model


def add_pool_capacity(
    model: cp_model.CpModel, pool_vars: Sequence[cp_model.IntVar | int], capacities: Sequence[int], gpus_per_stage: int
) -> list[list[cp_model.IntVar]]:
    """Add the capacity of every pool; returns member[i][q], true when stage i runs on pool q (other families,
    such as contiguity, reuse it)."""
    member: list[list[cp_model.IntVar]] = []
    for i, qv in enumerate(pool_vars):
        row = []
        for q in range(len(capacities)):
            b = model.new_bool_var(f"on{i}_{q}")
            model.add(qv == q).only_enforce_if(b)
            model.add(qv != q).only_enforce_if(b.negated())
            row.append(b)
        member.append(row)
    for q, healthy in enumerate(capacities):
        model.add(sum(row[q] for row in member) * gpus_per_stage <= healthy)
    return member
