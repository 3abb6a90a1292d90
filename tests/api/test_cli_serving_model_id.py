"""Serving exports name a model the engine can load (issue 48 §1: they printed `vllm serve llama-2-70b` and
`--model-path llama-3-70b`): a preset's Hugging Face id, the user's --model-id, a checkpoint directory, or MODEL
with a note saying what to put there."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from api.cli import app
from optimizer.spec.model_ids import PLACEHOLDER, loadable_model, stored_model

RUNNER = CliRunner()
ROOT = Path(__file__).resolve().parents[2]
SERVE = ["--cluster", "dgx-h100", "--mode", "inference", "--batch", "8", "--prompt-len", "512", "--output-len", "64"]


def _export(model: str, tool: str, *extra: str) -> dict[str, object]:
    r = RUNNER.invoke(app, ["plan", "--model", model, *SERVE, "--export", tool, "--json", *extra])
    assert r.exit_code == 0, r.output[-400:]
    export = json.loads(r.stdout)["export"]
    assert isinstance(export, dict)
    return export


@pytest.mark.parametrize(
    ("tool", "launch"), [("vllm", "vllm serve "), ("sglang", "--model-path "), ("trtllm", "trtllm-serve ")]
)
def test_a_preset_exports_its_hugging_face_id(tool: str, launch: str) -> None:
    export = _export("llama-2-7b", tool)
    assert f"{launch}meta-llama/Llama-2-7b-hf" in str(export["content"]), export["content"]
    assert "llama-2-7b " not in str(export["content"])


def test_a_config_file_takes_model_id_and_says_when_it_has_none() -> None:
    config = str(ROOT / "examples" / "qwen2-7b-config.json")
    bare = _export(config, "vllm")
    assert str(bare["content"]).startswith(f"vllm serve {PLACEHOLDER} "), bare["content"]
    assert "--model-id" in str(bare["notes"]) and "config.json" not in str(bare["content"]).split("\\")[0]
    given = _export(config, "vllm", "--model-id", "Qwen/Qwen2-7B")
    assert str(given["content"]).startswith("vllm serve Qwen/Qwen2-7B ") and "--model-id" not in str(given["notes"])


def test_a_hugging_face_model_directory_is_a_model_and_what_the_engine_loads(tmp_path: Path) -> None:
    folder = tmp_path / "Qwen2-7B"
    folder.mkdir()
    shutil.copy(ROOT / "examples" / "qwen2-7b-config.json", folder / "config.json")
    (folder / "model-00001-of-00004.safetensors").write_bytes(b"\0" * 8)
    export = _export(str(folder), "sglang")
    assert f"--model-path {folder}" in str(export["content"]), export["content"]


def test_names_known_only_to_the_service() -> None:
    assert stored_model("llama-3-70b") == ("meta-llama/Meta-Llama-3-70B", None)
    ref, note = stored_model("gpt-3-175b")
    assert ref == PLACEHOLDER and note is not None and "model_id" in note
    assert stored_model("my-model", "org/m") == ("org/m", None)
    assert loadable_model("llama-2-70b")[0] == "meta-llama/Llama-2-70b-hf"
