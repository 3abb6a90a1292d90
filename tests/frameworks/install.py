"""Builds the pinned framework environments the export checks run in (`make frameworks`, called by `make test`).

Each framework or engine the exports are checked against has a folder here: `requirements.txt` (its pinned release
and what it needs to parse its arguments on a CPU-only machine, PyPI only) and `check.py` (run with that
environment's Python: it takes an export on stdin and prints, as JSON, what the framework's own code made of it).
A folder may also have `source.txt`: one line `<mirror git directory> <ref> <path>...` naming a pinned source
snapshot to unpack beside the environment (for a framework whose training code is on no package index: Megatron-LM's
`megatron/training`). A folder may also have `requirements-nodeps.txt`: packages installed after requirements.txt
with `--no-deps` (an engine such as vLLM or SGLang pins a CUDA torch build; requirements.txt then lists by hand what
its argument parser imports, with the CPU torch). Nothing of a framework's code is committed.

Environments are cached outside the checkout (MESHPLAN_FRAMEWORK_CACHE, default ~/.cache/meshplan/frameworks), keyed
by a hash of the folder's requirements and source lines, and linked as `.frameworks/<name>` in the checkout: a fresh
clone reuses them. Standard library only: it runs before anything else is installed.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
LINKS = ROOT / ".frameworks"
NODEPS = "requirements-nodeps.txt"


def cache_root() -> Path:
    return Path(os.environ.get("MESHPLAN_FRAMEWORK_CACHE", Path.home() / ".cache" / "meshplan" / "frameworks"))


def frameworks() -> list[str]:
    """Every folder with a requirements.txt, in name order."""
    return sorted(p.parent.name for p in HERE.glob("*/requirements.txt"))


def key(name: str) -> str:
    h = hashlib.sha256()
    for f in ("requirements.txt", NODEPS, "source.txt"):
        path = HERE / name / f
        if path.exists():
            h.update(f.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:12]


def source_lines(name: str) -> list[list[str]]:
    path = HERE / name / "source.txt"
    if not path.exists():
        return []
    return [line.split() for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")]


def build(name: str, target: Path) -> None:
    """A new environment for `name` in a temporary folder beside `target`, renamed into place when whole."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=target.parent))
    try:
        subprocess.run([sys.executable, "-m", "venv", str(tmp)], check=True)
        pip = [str(tmp / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        subprocess.run([*pip, "-r", str(HERE / name / "requirements.txt")], check=True)
        if (HERE / name / NODEPS).exists():
            subprocess.run([*pip, "--no-deps", "-r", str(HERE / name / NODEPS)], check=True)
        for line in source_lines(name):
            mirror, ref, *paths = line
            if not Path(mirror).exists():
                raise SystemExit(
                    f"{name}: its pinned source {ref} is read from the snapshot {mirror}, which this machine does not "
                    f"have. Bring it with the search tool's `fetch` ({Path(mirror).parent.name.replace('+', '/')}), "
                    "then run `make frameworks` again."
                )
            src = tmp / "src"
            src.mkdir(exist_ok=True)
            archive = subprocess.run(
                ["git", "--git-dir", mirror, "archive", ref, *paths], check=True, capture_output=True
            ).stdout
            subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True)
            (tmp / "src" / "PINNED").write_text(f"{mirror} {ref}\n")
        (tmp / ".ready").write_text(key(name) + "\n")
        if target.exists():
            shutil.rmtree(target)
        tmp.rename(target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def ensure(name: str) -> Path:
    target = cache_root() / f"{name}-{key(name)}"
    if not (target / ".ready").exists():
        print(f"frameworks: building {name} in {target}", flush=True)
        build(name, target)
    LINKS.mkdir(exist_ok=True)
    link = LINKS / name
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(target)
    return target


def main(argv: list[str]) -> int:
    names = argv or frameworks()
    for name in names:
        ensure(name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
