"""OR-Tools' CP-SAT module, imported without pandas.

`ortools/sat/python/cp_model.py` (ortools 9.15) imports pandas at module level for its `*_series` helpers and
`values()` / `boolean_values()` (pd.Index / pd.Series in, pd.Series out), which meshplan never calls; pandas is
~0.4 s of CPU at every start of the CLI, a worker or a job process, most of a plan's wall time on small problems
(issue 49). The import below gives cp_model a stand-in for pandas holding the two names its module body reads
(`Union[pd.Index, pd.Series]` and the helpers' annotations), then points its `pd` at the real pandas, imported on
first use: the series helpers behave as upstream's. Every module of the search imports cp_model from here.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any


class _LazyPandas(types.ModuleType):
    """pandas, imported when one of its attributes is first read."""

    def __getattr__(self, name: str) -> Any:
        return getattr(importlib.import_module("pandas"), name)


def _import_cp_model() -> types.ModuleType:
    if "pandas" in sys.modules:  # already paid for (a notebook, the accuracy harness): nothing to save
        return importlib.import_module("ortools.sat.python.cp_model")
    stand_in = types.ModuleType("pandas")
    stand_in.Index = type("Index", (), {})  # type: ignore[attr-defined]  # only annotations read these two
    stand_in.Series = type("Series", (), {})  # type: ignore[attr-defined]
    sys.modules["pandas"] = stand_in
    try:
        module = importlib.import_module("ortools.sat.python.cp_model")
    finally:
        if sys.modules.get("pandas") is stand_in:
            del sys.modules["pandas"]
    module.pd = _LazyPandas("pandas")  # type: ignore[attr-defined]
    return module


_import_cp_model()

from ortools.sat.python import cp_model  # noqa: E402  (already imported above, without pandas)

__all__ = ["cp_model"]
