"""Every example in the README runs as printed (issue 48 §9: bare `meshplan`, sample files the repository lacked, a
`curl` that sent an empty body, `import-topo` overwriting a committed file, `sinfo` / `kubectl` examples that left
empty files).

Each ```sh block of README.md is split into its commands and every command is run with bash in a fresh working
directory that holds the checkout's `.venv`, `examples` and `benchmarks` (so what a command writes lands there, never
in the checkout). Only these substitutions are made, the ones a reader makes: `TOKEN=...` gets the token the server
printed, `localhost:8000` the test server's port, and `curl` gets `--fail-with-body -sS` so an HTTP error fails the
test. The service examples run in order against a server of their own (embedded mode, a fresh SQLite database, as
`make run`); `sinfo`, `scontrol` and `kubectl` are stand-ins on PATH that print recorded answers of Slurm 22.05 and
kubectl (tests/optimizer/spec/scheduler_data). `make run` and `make test` are this suite's own entry points and are
checked to be Makefile targets. A new example that fits none of these fails `test_every_example_is_run`.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.served import served

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
SCHEDULER_DATA = ROOT / "tests" / "optimizer" / "spec" / "scheduler_data"
OFFLINE = ("estimate", "plan", "import-topo", "gpus", "models")


@dataclass(frozen=True)
class Example:
    block: int
    text: str

    @property
    def words(self) -> list[str]:
        return self.text.split()

    def __str__(self) -> str:
        return f"block {self.block}: {' '.join(self.words)[:90]}"


def examples() -> list[Example]:
    """The README's shell commands, a `\\`-continued command as one, comment-only lines dropped."""
    out: list[Example] = []
    for i, block in enumerate(re.findall(r"```sh\n(.*?)```", README, re.S)):
        current = ""
        for line in block.splitlines():
            current += line + "\n"
            if not line.rstrip().endswith("\\"):
                if current.strip() and not current.strip().startswith("#"):
                    out.append(Example(i, current.strip()))
                current = ""
    return out


EXAMPLES = examples()


def kind(e: Example) -> str:
    w = e.words
    if w[:1] == ["make"]:
        return "make"
    if w[:1] == [".venv/bin/meshplan"] and w[1] in OFFLINE:
        return "offline"
    if w[:2] == [".venv/bin/python", "benchmarks/placement.py"]:
        return "offline"
    if "import-slurm" in w or "import-k8s" in w:
        return "scheduler"
    return "service"


def test_every_example_is_run() -> None:
    """Every command is one of the kinds below; the service ones are exactly those the walkthrough runs."""
    assert len(EXAMPLES) > 25
    service = [e for e in EXAMPLES if kind(e) == "service"]
    for e in service:
        assert e.words[0] in ("TOKEN=...", "curl", "export", ".venv/bin/meshplan"), f"not runnable here: {e}"
        assert e.words[0] != "meshplan", f"bare meshplan (not on PATH after `make run`): {e}"
    assert {e.block for e in service} == set(SERVICE_BLOCKS) | {SYNC_BLOCK}


def test_make_examples_are_targets() -> None:
    makefile = (ROOT / "Makefile").read_text()
    for e in (e for e in EXAMPLES if kind(e) == "make"):
        assert re.search(rf"^{e.words[1]}:", makefile, re.M), e


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A directory where the README's relative paths resolve to the checkout and anything written stays."""
    for name in (".venv", "examples", "benchmarks"):
        (tmp_path / name).symlink_to(ROOT / name)
    return tmp_path


@pytest.fixture
def fake_schedulers(tmp_path: Path) -> Path:
    """`sinfo`, `scontrol` and `kubectl` that print recorded answers (whatever their arguments)."""
    bin_dir = tmp_path / "fake-bin"
    bin_dir.mkdir()
    for name, answer in (
        ("sinfo", "sinfo-22.05.json"),
        ("scontrol", "scontrol-show-topology-22.05.txt"),
        ("kubectl", "kubectl-nodes.json"),
    ):
        script = bin_dir / name
        script.write_text(f"#!/bin/sh\ncat {shlex.quote(str(SCHEDULER_DATA / answer))}\n")
        script.chmod(0o755)
    # What the README hands its exports to: `sbatch FILE` refuses a file that does not start with #! as Slurm does
    # ("This does not look like a batch script"; a real controller takes the file in tests/api/test_cli_job_export.py),
    # and `kubectl apply -f FILE` refuses one that is not a JobSet.
    (bin_dir / "sbatch").write_text(
        '#!/bin/sh\nhead -c 2 "$1" | grep -q "#!" || '
        '{ echo "sbatch: error: This does not look like a batch script." >&2; exit 1; }\n'
        'echo "Submitted batch job 1"\n'
    )
    (bin_dir / "kubectl").write_text(
        '#!/bin/sh\nif [ "$1" = apply ]; then '
        'grep -q "^kind: JobSet" "$3" || { echo "error: not a JobSet" >&2; exit 1; }; '
        'echo "jobset.jobset.x-k8s.io created"; exit 0; fi\n'
        f"cat {shlex.quote(str(SCHEDULER_DATA / 'kubectl-nodes.json'))}\n"
    )
    for name in ("sbatch", "kubectl"):
        (bin_dir / name).chmod(0o755)
    return bin_dir


def bash(script: str, cwd: Path, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["/bin/bash", "-c", "set -euo pipefail\n" + script],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MESHPLAN_") and k not in ("DATABASE_URL",)}
    return {**env, **extra}


@pytest.mark.parametrize("example", [e for e in EXAMPLES if kind(e) == "offline"], ids=str)
def test_offline_example_runs(example: Example, workdir: Path, fake_schedulers: Path) -> None:
    path = f"{fake_schedulers}:{os.environ['PATH']}"  # the exports go to sbatch and kubectl as the README pipes them
    r = bash(example.text, workdir, clean_env(DATABASE_URL=f"sqlite:///{workdir / 'unused.db'}", PATH=path))
    assert r.returncode == 0, (example.text, r.stderr[-800:])
    written = [p for p in workdir.iterdir() if p.is_file() and p.suffix == ".yaml"]
    assert r.stdout.strip() or written, example.text
    assert not (workdir / "unused.db").exists()  # an offline example needs no database


@pytest.mark.parametrize("example", [e for e in EXAMPLES if kind(e) == "scheduler"], ids=str)
def test_scheduler_import_example_runs(example: Example, workdir: Path, fake_schedulers: Path) -> None:
    path = f"{fake_schedulers}:{os.environ['PATH']}"
    r = bash(example.text, workdir, clean_env(PATH=path))
    assert r.returncode == 0, (example.text, r.stderr[-800:])
    target = workdir / example.words[example.words.index("--output") + 1]
    assert "pools:" in target.read_text()


def test_scheduler_import_leaves_no_file_when_the_scheduler_is_missing(workdir: Path, tmp_path: Path) -> None:
    """Without sinfo or kubectl on PATH the examples fail, and leave no empty YAML (a `> file` did)."""
    empty_bin = tmp_path / "empty-bin"
    empty_bin.mkdir()
    (empty_bin / "cat").symlink_to("/bin/cat")
    env = clean_env(PATH=f"{empty_bin}:{Path(sys.executable).parent}")
    for e in (e for e in EXAMPLES if kind(e) == "scheduler"):
        r = bash(e.text, workdir, env)
        assert r.returncode != 0, e
    assert not [p.name for p in workdir.iterdir() if p.suffix in (".yaml", ".json")]


SERVICE_BLOCKS = (1, 3)  # "The service" and "Acceptance tests in"
SYNC_BLOCK = 2  # `meshplan sync 1 --from slurm` among the examples


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, str, str]]:
    """`make run`'s setup on a fresh SQLite file: migrated, the first write token, jobs in-process."""
    from api.app import create_app
    from store.db import Database
    from store.migrate import upgrade
    from store.repositories.tokens import TokenRepository
    from store.settings import Settings

    (tmp_path / "server").mkdir()
    url = f"sqlite:///{tmp_path / 'server' / 'readme.db'}"
    upgrade(url)
    db = Database(url)
    with db.session() as s:
        _row, token = TokenRepository(s).create("first-admin", ["write"])
    with served(create_app(Settings(database_url=url, embedded_jobs="thread"), db)) as host:
        yield host, token, url
    db.dispose()


def as_run(e: Example, host: str, token: str) -> str:
    """The reader's substitutions: the token, the server's address, curl failing on an HTTP error."""
    text = e.text.replace("TOKEN=...", f"TOKEN={token}").replace("localhost:8000", host)
    return re.sub(r"^curl ", "curl --fail-with-body -sS ", text, flags=re.M)


def test_service_examples_run_in_order(server: tuple[str, str, str], workdir: Path, fake_schedulers: Path) -> None:
    host, token, url = server
    # TOKEN: the reader's shell keeps what the first block set for the later ones
    env = clean_env(DATABASE_URL=url, PATH=f"{fake_schedulers}:{os.environ['PATH']}", TOKEN=token)
    service = [e for e in EXAMPLES if kind(e) == "service"]
    first = [e for e in service if e.block == SERVICE_BLOCKS[0]]
    r = bash("\n".join(as_run(e, host, token) for e in first), workdir, env)
    assert r.returncode == 0, r.stdout[-800:] + r.stderr[-800:]
    headers = {"Authorization": f"Bearer {token}"}
    deadline = time.monotonic() + 120
    while (job := httpx.get(f"http://{host}/v1/jobs/1", headers=headers).json())["status"] in ("queued", "running"):
        assert time.monotonic() < deadline, job
        time.sleep(0.2)
    assert job["status"] == "succeeded", job
    plans = httpx.get(f"http://{host}/v1/plans", params={"cluster_id": 1}, headers=headers).json()
    assert plans["total"] >= 1
    model = httpx.get(f"http://{host}/v1/models/1", headers=headers).json()
    assert model["name"] == "qwen2-7b"

    acceptance = [e for e in service if e.block == SERVICE_BLOCKS[1]]
    r = bash("\n".join(as_run(e, host, token) for e in acceptance), workdir, env)
    assert r.returncode == 0, r.stdout[-800:] + r.stderr[-800:]
    tests = httpx.get(f"http://{host}/v1/clusters/1/acceptance-tests", headers=headers).json()
    assert len(tests) == 4 and {t["kind"] for t in tests} == {"nccl-tests", "gemm"}, tests  # 3 + the curl's
    assert all(t["figures"] for t in tests)  # the curl sent the file, not an empty body

    sync = [e for e in service if e.block == SYNC_BLOCK]
    assert len(sync) == 1
    r = bash(as_run(sync[0], host, token), workdir, env)
    assert r.returncode == 0, r.stdout[-800:] + r.stderr[-800:]
    assert not [p.name for p in workdir.iterdir() if p.suffix == ".db"]  # it used the service's database
