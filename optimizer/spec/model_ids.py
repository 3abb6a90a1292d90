"""What a serving engine loads for a model: `vllm serve ID`, `sglang --model-path ID`, `trtllm-serve ID` take a
Hugging Face id or a local checkpoint directory, never meshplan's preset name or a bare config.json
[issue 48 §1: the exports printed `vllm serve llama-2-70b`]."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Protocol, Self, TypeVar


class _Noted(Protocol):
    notes: list[str]

    def model_copy(self, *, update: dict[str, object] | None = None, deep: bool = False) -> Self: ...


T = TypeVar("T", bound=_Noted)

PLACEHOLDER = "MODEL"
"""Stands in the export for a model with no loadable id or path; a note says what to put there."""

WEIGHT_PATTERNS = ("*.safetensors", "*.bin", "*.pt", "*.gguf")
"""Files that make a directory a checkpoint an engine can load (Hugging Face's safetensors / PyTorch shards)."""


def preset_hf_id(name: str) -> str | None:
    """The Hugging Face id a shipped preset was taken from (its config.json's `_name_or_path`), or None (a preset
    without published weights: GPT-3 175B, MT-NLG 530B)."""
    res = resources.files("optimizer.spec") / "presets" / "models" / f"{name.lower()}.json"
    if not res.is_file():
        return None
    value = json.loads(res.read_text()).get("_name_or_path")
    return str(value) if isinstance(value, str) and "/" in value else None


def _checkpoint_dir(path: Path) -> Path | None:
    """The directory of `path` (itself when a directory) when it holds weight files."""
    folder = path if path.is_dir() else path.parent
    try:
        has_weights = any(next(folder.glob(p), None) is not None for p in WEIGHT_PATTERNS)
    except OSError:
        return None
    return folder if has_weights else None


def stored_model(name: str, model_id: str | None = None) -> tuple[str, str | None]:
    """As loadable_model for a model known by name only (the service's models): a preset's Hugging Face id, else
    PLACEHOLDER and the note (`model_id` wins)."""
    if model_id:
        return model_id, None
    hf = preset_hf_id(name)
    if hf is not None:
        return hf, None
    return PLACEHOLDER, (
        f"{name} has no Hugging Face id meshplan knows of: replace {PLACEHOLDER} with the checkpoint's Hugging Face "
        "id or directory (--model-id, or ?model_id= on the export)"
    )


def with_note(note: str | None, exports: list[T]) -> list[T]:
    """The exports with `note` (what PLACEHOLDER stands for) first among their notes."""
    if note is None:
        return exports
    return [e.model_copy(update={"notes": [note, *e.notes]}) for e in exports]


def loadable_model(ref: str, model_id: str | None = None) -> tuple[str, str | None]:
    """What an engine loads for the model given as `ref` (a preset name or a file or directory), and a note when
    there is nothing loadable (the export then says PLACEHOLDER). `model_id` (the user's `--model-id`) wins."""
    if model_id:
        return model_id, None
    path = Path(ref)
    try:
        is_file = path.exists()
    except OSError:
        is_file = False
    if not is_file:
        return stored_model(ref)
    checkpoint = _checkpoint_dir(path.resolve())
    if checkpoint is not None:
        return str(checkpoint), None
    return PLACEHOLDER, (
        f"{ref} is a model description, not a checkpoint an engine can load: replace {PLACEHOLDER} with its "
        "Hugging Face id or a local directory with its weights (--model-id)"
    )
