"""Every option of every `meshplan` command, enumerated from the click command tree (not a listed subset), fed wrong
types, special files (/dev/zero, /dev/null, a directory, a FIFO nothing writes to), huge numbers and very long
strings: each invocation ends in one line on stderr and exit code 2, or a clean success, never a traceback and
never a hang [issue 37 item 3]. In-process through typer's runner; two subprocess runs check the real FIFO wait.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer.testing
from typer.main import get_command
from typer.testing import CliRunner

import optimizer.spec.yaml_documents as documents
from api.cli import app

RUNNER = CliRunner()
MESHPLAN = str(Path(sys.executable).parent / "meshplan")
# Services that would run for ever on a valid command line: only values click itself refuses reach them.
SERVICES = {"serve", "worker", "beat"}
# A value each required parameter is given while another one is fuzzed: a command line valid but for the fuzzed
# value, so that the value reaches the code that reads it.
REQUIRED = {
    "--model": "llama-3-8b",
    "--cluster": "dgx-h100:1",
    "--gpu": "H100-SXM-80GB",
    "--name": "n",
    "--scope": "read",
    "--gbs": "8",
    "--seq-len": "128",
}
# Commands whose command line needs more than its click-required parameters to reach the fuzzed value.
BASE = {
    # a plan on one GPU with tp pinned solves in 0.1 s (3.8 s on the node's eight)
    "plan": ["--gbs", "8", "--seq-len", "128", "--time-limit", "0.1", "--max-gpus", "1", "--pin", "tp=1"],
    "estimate": ["--gbs", "8", "--seq-len", "128"],
}
SCHEDULER_DATA = Path(__file__).resolve().parents[1] / "optimizer" / "spec" / "scheduler_data"
ARGUMENT_FILES = {  # a valid file for each command's file argument
    "import-topo": None,  # the nvidia-smi topo table written by the `special` fixture
    "import-slurm": str(SCHEDULER_DATA / "sinfo-22.05.json"),
    "import-k8s": str(SCHEDULER_DATA / "kubectl-nodes.json"),
}
TOPO = "\tGPU0\tGPU1\nGPU0\t X \tNV18\nGPU1\tNV18\t X \n"


def commands() -> Iterator[tuple[list[str], Any]]:
    """(command path, click command) for every leaf command of the `meshplan` tree."""

    def walk(cmd: Any, path: list[str]) -> Iterator[tuple[list[str], Any]]:
        if hasattr(cmd, "commands"):
            for name, sub in sorted(cmd.commands.items()):
                yield from walk(sub, [*path, name])
        else:
            yield path, cmd

    yield from walk(get_command(app), [])


def kind(param: Any) -> str:
    """The parameter's value type as typer declared it: int, float, Path, str, a list of those, or bool."""
    return str(param.bare_type()).removeprefix("list[").removesuffix("]").removesuffix(" | None")


@pytest.fixture(scope="module")
def special(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("special")
    fifo = d / "fifo"
    os.mkfifo(fifo)
    topo = d / "topo.txt"
    topo.write_text(TOPO)
    return {"dir": str(d), "fifo": str(fifo), "topo": str(topo)}


def bad_values(k: str, special: dict[str, str]) -> list[str]:
    files = ["/dev/zero", "/dev/null", special["dir"], special["fifo"]]
    return {  # a few a type: some 840 invocations in about 10 s
        "int": ["abc", "9" * 5000, "-1", "/dev/zero"],
        "float": ["abc", "1e999", "-1e308", "/dev/null"],
        "Path": [*files, "x" * 5000],
        "str": [*files, "x" * 100_000],
    }.get(k, ["abc"])


def command_line(path: list[str], cmd: Any, fuzzed: Any, value: str | None, special: dict[str, str]) -> list[str]:
    """The command line: its required parameters valid, the fuzzed one (an argument in its place, an option at
    the end) given `value`; a flag is given `value` as `--flag=value`."""
    positional: list[str] = []
    options: list[str] = []
    for p in cmd.params:
        if p.param_type_name == "argument":
            if p is fuzzed:
                positional.append(str(value))
            elif p.required:
                file = ARGUMENT_FILES.get(path[0]) or special["topo"]
                positional.append(file if kind(p) in {"Path", "str"} else "1")
        elif p.required and p is not fuzzed:
            options += [p.opts[0], REQUIRED.get(p.opts[0], "1")]
    base = BASE.get(path[0], [])
    for i in range(0, len(base), 2):
        if fuzzed is None or base[i] not in fuzzed.opts:
            options += base[i : i + 2]
    if fuzzed is not None and fuzzed.param_type_name == "option":
        options += [f"{fuzzed.opts[0]}={value}"] if getattr(fuzzed, "is_flag", False) else [fuzzed.opts[0], str(value)]
    return [*path, *positional, *options]


def cases(special: dict[str, str]) -> Iterator[tuple[list[str], bool]]:
    """(command line, whether click itself must refuse it) for every value of every option of every command, and
    an unknown option for each command (those without options too)."""
    for path, cmd in commands():
        yield [*path, "--no-such-option=1"], True
        for p in cmd.params:
            k = kind(p)
            if p.param_type_name == "option" and getattr(p, "is_flag", False):
                yield command_line(path, cmd, p, "abc", special), True  # a flag takes no value
                continue
            typed = k in {"int", "float"}
            if path[0] in SERVICES and not typed:
                continue  # a valid --host would start the server
            for value in bad_values(k, special):
                if path[0] in SERVICES and _a_number(value, k):
                    continue  # numbers click accepts: the service would start
                yield command_line(path, cmd, p, value, special), typed and not _a_number(value, k)


def _a_number(value: str, k: str) -> bool:
    try:
        int(value) if k == "int" else float(value)
    except ValueError:
        return False
    return True


ENDINGS = {"plan": (0, 1, 2, 3), "estimate": (0, 1, 2)}
"""Besides 0 and 2: plan and estimate say "does not fit" with 1 and plan "no plan within the time limit" with 3
(api.cli_output, README "Exit codes")."""


def test_every_option_of_every_command_ends_in_one_line_or_success(
    special: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(documents, "PIPE_WAIT_S", 0.05)  # the real wait is checked by the subprocess test below
    monkeypatch.setattr(documents, "MAX_DOCUMENT_BYTES", 2**20)  # /dev/zero stops at 1 MiB, not 64
    command = get_command(app)  # built once: typer's runner rebuilt the whole tree each call (2/3 of the time)
    monkeypatch.setattr(typer.testing, "_get_command", lambda _app: command)
    env = {
        "DATABASE_URL": f"sqlite:///{tmp_path / 'unmigrated.db'}",
        "MESHPLAN_URL": "http://127.0.0.1:9",  # the discard port: nothing listens, refused at once
        "MESHPLAN_TOKEN": "t",
        "REDIS_URL": "",
    }
    seen_commands: set[str] = set()
    seen_options = 0
    t0 = time.monotonic()
    failures: list[str] = []
    for line, must_refuse in cases(special):
        seen_commands.add(line[0])
        seen_options += 1
        result = RUNNER.invoke(app, line, env=env)
        shown = [a if len(a) < 60 else f"{a[:20]}...({len(a)})" for a in line]
        errors = result.stderr.strip().splitlines()
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            failures.append(f"{shown}: {type(result.exception).__name__}: {str(result.exception)[:200]}")
        elif "Traceback" in result.output:
            failures.append(f"{shown}: traceback")
        elif result.exit_code not in ENDINGS.get(line[0], (0, 2)) or (must_refuse and result.exit_code != 2):
            failures.append(f"{shown}: exit {result.exit_code}: {result.output[-200:]}")
        elif result.exit_code == 2 and (len(errors) != 1 or not errors[0].startswith("error: ")):
            failures.append(f"{shown}: not one line: {result.stderr[-300:]!r}")
    assert not failures, f"{len(failures)} bad endings:\n" + "\n".join(failures[:30])
    every = {path[0] for path, _cmd in commands()}
    assert seen_commands == every and seen_options > 700, (sorted(every - seen_commands), seen_options)
    assert time.monotonic() - t0 < 90


def test_a_fifo_nothing_writes_to_ends_in_one_line_not_a_hang(special: dict[str, str]) -> None:
    """A real process on a FIFO with no writer: it waits PIPE_WAIT_S, then one line and exit 2 (it blocked in
    open() for ever)."""
    args = ["estimate", "--model", special["fifo"], "--cluster", "dgx-h100:1", "--gbs", "8", "--seq-len", "128"]
    t0 = time.monotonic()
    r = subprocess.run([MESHPLAN, *args], capture_output=True, text=True, timeout=documents.PIPE_WAIT_S + 30)
    assert r.returncode == 2, r.stderr[-500:]
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: model: ") and "nothing wrote to" in lines[0], r.stderr
    assert time.monotonic() - t0 < documents.PIPE_WAIT_S + 20


def test_a_pipe_with_a_writer_is_read(tmp_path: Path) -> None:
    """What the FIFO check must not refuse: a pipe whose writer is there (bash's <(...), a FIFO being fed)."""
    fifo = tmp_path / "topo"
    os.mkfifo(fifo)
    writer = subprocess.Popen(["sh", "-c", f"sleep 0.3; printf '{TOPO}' > {fifo}"])
    result = RUNNER.invoke(app, ["import-topo", str(fifo), "--gpu", "H100-SXM-80GB"])
    writer.wait(10)
    assert result.exit_code == 0, result.output[-400:]
    assert "H100-SXM-80GB" in result.output
