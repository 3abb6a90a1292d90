"""Data flows one way: api/workers -> service -> store -> optimizer. The optimizer imports nothing upward; the
product never imports the published-run harness (accuracy)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = {
    "optimizer": {
        "service",
        "store",
        "api",
        "workers",
        "accuracy",
        "sqlalchemy",
        "fastapi",
        "celery",
        "redis",
        "alembic",
        "subprocess",  # the optimizer reads what a scheduler printed; running it is the service's [issue 34]
    },
    "store": {"service", "api", "workers", "accuracy", "fastapi", "celery", "subprocess"},
    "service": {"api", "workers", "accuracy", "fastapi", "celery"},
    "workers": {"api", "accuracy", "fastapi"},
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


def _module_graph(package: str) -> dict[str, set[str]]:
    """Module -> the modules of `package` it imports, at any depth of the file (function-level imports too)."""
    graph: dict[str, set[str]] = {}
    for path in (ROOT / package.replace(".", "/")).rglob("*.py"):
        mod = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                deps.add(node.module)
                deps |= {f"{node.module}.{a.name}" for a in node.names}
            elif isinstance(node, ast.Import):
                deps |= {a.name for a in node.names}
        graph[mod] = {d for d in deps if d.startswith(package + ".")}
    for mod in graph:
        graph[mod] = {d for d in graph[mod] if d in graph and d != mod}
    return graph


def test_optimizer_has_no_import_cycle() -> None:
    """The search reads top-down (planner -> inference planner, diagnosis, explain -> candidates -> cost model):
    no module of the optimizer imports, even inside a function, one that imports it back."""
    graph = _module_graph("optimizer")
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(mod: str) -> None:
        state[mod] = 1
        stack.append(mod)
        for dep in sorted(graph[mod]):
            if state.get(dep) == 1:
                cycle = [*stack[stack.index(dep) :], dep]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if dep not in state:
                visit(dep)
        stack.pop()
        state[mod] = 2

    for mod in sorted(graph):
        if mod not in state:
            visit(mod)


# The rooms of the optimizer, lowest first: a room may import itself and the rooms before it, never one after it.
# search and calibration share a floor (both read the cost model; neither reads the other); exports read them all.
OPTIMIZER_FLOORS: tuple[tuple[str, ...], ...] = (
    ("errors",),
    ("spec",),
    ("frameworks",),
    ("costmodel",),
    ("placement",),
    ("search", "calibration"),
    ("exports",),
)


def _room(module: str) -> str:
    """optimizer.costmodel.terms.pipeline -> costmodel; optimizer.errors -> errors."""
    return module.split(".")[1]


def test_optimizer_rooms_import_only_downward() -> None:
    """Each optimizer subpackage imports only those on lower floors (and its own); any import, at any depth of the
    file, counts. A new module must sit in a room (no loose modules beside errors.py)."""
    floor = {room: i for i, rooms in enumerate(OPTIMIZER_FLOORS) for room in rooms}
    graph = _module_graph("optimizer")
    for mod, deps in sorted(graph.items()):
        if mod == "optimizer":
            continue
        room = _room(mod)
        assert room in floor, f"{mod} is not in a room of the optimizer ({', '.join(floor)})"
        for dep in sorted(deps):
            other = _room(dep)
            assert other == room or floor[other] < floor[room], (
                f"{mod} (floor {floor[room]}, {room}) imports {dep} (floor {floor[other]}, {other})"
            )
