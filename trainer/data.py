"""Training prompts: a JSONL or text file, or a handful of built-in ones (no downloads).

::

    load_prompts(Path("prompts.jsonl"))   # lines like {"prompt": "Name a prime."}
    load_prompts(Path("prompts.txt"))     # one prompt per line, blank lines skipped
    load_prompts(None)                    # DEFAULT_PROMPTS
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

#: Short, open-ended instructions: a 135M policy answers them in a few tokens, and answers
#: differ enough for group diversity and a judge's grade to tell them apart.
DEFAULT_PROMPTS: tuple[str, ...] = (
    "Give one tip for writing clear code.",
    "Describe the sea in one sentence.",
    "Name a fruit and say why you like it.",
    "Explain what a reward model is, briefly.",
    "Suggest a name for a friendly robot.",
    "Write a one-line poem about autumn.",
    "What is a good habit to start today?",
    "Say something kind to a new colleague.",
)


class PromptFileError(ValueError):
    """The prompts file is empty or a line is not a usable prompt (the message says which)."""


def load_prompts(path: Path | None) -> list[str]:
    """The prompts of ``path`` (``.jsonl``: a ``"prompt"`` string per object; else one per
    line), or :data:`DEFAULT_PROMPTS` when ``path`` is None."""
    if path is None:
        return list(DEFAULT_PROMPTS)
    lines = path.read_text(encoding="utf-8").splitlines()
    if path.suffix == ".jsonl":
        prompts = [_jsonl_prompt(line, path, n) for n, line in enumerate(lines, 1) if line.strip()]
    else:
        prompts = [line.strip() for line in lines if line.strip()]
    if not prompts:
        raise PromptFileError(f"{path}: no prompts")
    return prompts


def training_prompts(path: Path | None, groups_per_step: int) -> list[str]:
    """:func:`load_prompts`, refusing fewer prompts than one optimizer step needs."""
    prompts = load_prompts(path)
    if len(prompts) < groups_per_step:
        raise PromptFileError(
            f"{path}: {len(prompts)} prompt(s), but one step takes {groups_per_step} groups"
        )
    return prompts


def _jsonl_prompt(line: str, path: Path, number: int) -> str:
    try:
        row = json.loads(line)
    except json.JSONDecodeError as exc:
        raise PromptFileError(f"{path}:{number}: not JSON ({exc.msg})") from None
    prompt = row.get("prompt") if isinstance(row, dict) else None
    if not isinstance(prompt, str) or not prompt.strip():
        raise PromptFileError(f'{path}:{number}: expected {{"prompt": "<non-empty text>"}}')
    return prompt


def as_rows(prompts: list[str], *, chat: bool) -> list[dict[str, Any]]:
    """Dataset rows in TRL's format: ``{"prompt": text}`` or, for a chat model, the prompt
    as one user message (TRL then applies the model's chat template)."""
    if chat:
        return [{"prompt": [{"role": "user", "content": p}]} for p in prompts]
    return [{"prompt": p} for p in prompts]
