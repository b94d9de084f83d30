"""Training prompts: a JSONL or text file, or a handful of built-in ones (no downloads).

::

    load_prompts(Path("prompts.jsonl"))   # lines like {"prompt": "Name a prime."}
    load_rows(Path("export.jsonl"))       # [{"prompt": ..., "rubric_id": "rb_..@1"}, ...]
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
    return [row["prompt"] for row in load_rows(path)]


def load_rows(path: Path | None) -> list[dict[str, Any]]:
    """``{"prompt": text, **columns}`` per prompt: a JSONL line's other string fields
    (``rubric_id`` of an exported rubric dataset) become dataset columns, which TRL hands to
    the reward function and ``plaudit_reward_func`` sends with each group."""
    if path is None:
        return [{"prompt": p} for p in DEFAULT_PROMPTS]
    lines = path.read_text(encoding="utf-8").splitlines()
    if path.suffix == ".jsonl":
        rows = [_jsonl_row(line, path, n) for n, line in enumerate(lines, 1) if line.strip()]
        _fill_columns(rows)
    else:
        rows = [{"prompt": line.strip()} for line in lines if line.strip()]
    if not rows:
        raise PromptFileError(f"{path}: no prompts")
    return rows


def training_prompts(path: Path | None, groups_per_step: int) -> list[dict[str, Any]]:
    """:func:`load_rows`, refusing fewer prompts than one optimizer step needs."""
    rows = load_rows(path)
    if len(rows) < groups_per_step:
        raise PromptFileError(
            f"{path}: {len(rows)} prompt(s), but one step takes {groups_per_step} groups"
        )
    return rows


def _jsonl_row(line: str, path: Path, number: int) -> dict[str, Any]:
    row = json.loads(line) if _is_json(line) else None
    prompt = _jsonl_prompt(line, path, number)
    columns = {
        k: v for k, v in (row or {}).items() if k != "prompt" and isinstance(v, str | int | float)
    }
    return {"prompt": prompt, **columns}


def _is_json(line: str) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except json.JSONDecodeError:
        return False


def _fill_columns(rows: list[dict[str, Any]]) -> None:
    """Give every row every column (None where a line lacks it): a dataset column is on every
    row, and a row without ``rubric_id`` falls back to the spec's rubric."""
    names = {name for row in rows for name in row}
    for row in rows:
        for name in names - set(row):
            row[name] = None


def _jsonl_prompt(line: str, path: Path, number: int) -> str:
    try:
        row = json.loads(line)
    except json.JSONDecodeError as exc:
        raise PromptFileError(f"{path}:{number}: not JSON ({exc.msg})") from None
    prompt = row.get("prompt") if isinstance(row, dict) else None
    if not isinstance(prompt, str) or not prompt.strip():
        raise PromptFileError(f'{path}:{number}: expected {{"prompt": "<non-empty text>"}}')
    return prompt


def as_rows(prompts: list[str] | list[dict[str, Any]], *, chat: bool) -> list[dict[str, Any]]:
    """Dataset rows in TRL's format: ``{"prompt": text}`` or, for a chat model, the prompt
    as one user message (TRL then applies the model's chat template); other columns kept."""
    rows = [p if isinstance(p, dict) else {"prompt": p} for p in prompts]
    if chat:
        return [{**r, "prompt": [{"role": "user", "content": r["prompt"]}]} for r in rows]
    return [dict(r) for r in rows]
