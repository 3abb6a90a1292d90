"""Data flows one way: api/workers -> store -> optimizer. The optimizer imports nothing upward."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = {
    "optimizer": {"store", "api", "workers", "sqlalchemy", "fastapi", "celery", "redis", "alembic"},
    "store": {"api", "workers", "fastapi", "celery"},
    "workers": {"api", "fastapi"},
}


def imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_no_upward_imports() -> None:
    for package, banned in FORBIDDEN.items():
        for path in (ROOT / package).rglob("*.py"):
            bad = imports(path) & banned
            assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


def test_tasks_are_thin() -> None:
    """A task body is one service call (and, for a held lease, a retry): ids in, nothing else."""
    tree = ast.parse((ROOT / "workers" / "tasks.py").read_text())
    for fn in (n for n in tree.body if isinstance(n, ast.FunctionDef)):
        assert len(fn.body) <= 3, fn.name
        assert not any(isinstance(n, ast.With | ast.For | ast.While) for n in ast.walk(fn)), fn.name
