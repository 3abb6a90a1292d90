"""File inputs at the CLI: a file that is not UTF-8, larger than the cap, or a path too long for the file system
ends as one line naming the option, exit code 2 (issue 37 §5). In-process, through typer's runner."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import optimizer.spec.yaml_documents as documents
from api.cli import app

RUNNER = CliRunner()
ESTIMATE = ["estimate", "--cluster", "dgx-h100:2", "--gbs", "8", "--seq-len", "8", "--tp", "1"]
LATIN1_TOPO = "\tGPU0\tGPU1\nGPU0\t X \tNV18\nGPU1\tNV18\t X \n# caf\xe9\n".encode("latin-1")


def _error_line(result: Any, starts: str) -> str:
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2, (result.exit_code, result.output[-400:], result.exception)
    assert len(lines) == 1 and lines[0].startswith(starts), result.output[-400:]
    return lines[0]


def test_import_topo_names_a_file_that_is_not_utf8(tmp_path: Path) -> None:
    topo = tmp_path / "topo.txt"
    topo.write_bytes(LATIN1_TOPO)
    line = _error_line(RUNNER.invoke(app, ["import-topo", str(topo), "--gpu", "H100-SXM-80GB"]), "error: path:")
    assert "not UTF-8" in line and "topo.txt" in line


def test_import_topo_names_stdin_that_is_not_utf8() -> None:
    result = RUNNER.invoke(app, ["import-topo", "-", "--gpu", "H100-SXM-80GB"], input=LATIN1_TOPO)
    assert "stdin is not UTF-8" in _error_line(result, "error: path:")


def test_an_endless_model_file_stops_at_the_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    """`--model /dev/zero` read until memory ran out; the cap (64 MiB, lowered here) ends it."""
    monkeypatch.setattr(documents, "MAX_DOCUMENT_BYTES", 2**20)
    line = _error_line(RUNNER.invoke(app, [*ESTIMATE, "--model", "/dev/zero"]), "error: model:")
    assert "/dev/zero is larger than 1 MiB" in line


def test_a_file_over_the_cap_is_refused_and_one_under_is_read(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(documents, "MAX_DOCUMENT_BYTES", 100)
    big, small = tmp_path / "big.txt", tmp_path / "small.txt"
    big.write_text("x" * 101)
    small.write_text("a\r\nb\rc\n" + "x" * 80)
    with pytest.raises(documents.DomainError, match="larger than"):
        documents.read_document(big, "--log")
    assert documents.read_document(small, "--log").startswith("a\nb\nc\n")  # newlines as Path.read_text reads them


@pytest.mark.parametrize("length", [300, 5000])
def test_a_model_reference_too_long_for_a_path_is_one_line(length: int) -> None:
    line = _error_line(RUNNER.invoke(app, [*ESTIMATE, "--model", "m" * length]), "error: model:")
    assert len(line) < 400  # the reference is cut, not echoed whole
