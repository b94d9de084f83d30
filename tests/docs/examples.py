"""The command examples of README.md and docs/, read from their Markdown (issue 21).

An example is a fenced ``bash`` or ``python`` block. It runs in CI against a live embedded
server unless an HTML comment right above it says ``<!-- example: skip REASON -->`` (a GPU
server, a long training run): every skip names why. A fenced block right after it (blank lines
and one HTML comment between) is its shown output, checked by :func:`compare`:

- ``json``: the JSON values the commands print, in order. ``<!-- output: values -->`` above it
  compares values (numbers within 1e-3; ``...`` inside a string stands for any text);
  otherwise only the shape is compared, for output that depends on the model or the moment
  (ids, times, grades). Either way an object in the shown output may leave keys out, and a
  list may show its first items only;
- ``http``: a response head; its status code and the header names it shows are checked.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
COMMENT = re.compile(r"<!--\s*(example|output):\s*(.*?)\s*-->", re.DOTALL)


@dataclass(frozen=True)
class Example:
    """One bash block with what the page shows it prints."""

    page: str
    line: int
    script: str
    language: str
    skip: str | None = None
    output_kind: str | None = None
    output: str | None = None
    compare_values: bool = False

    @property
    def name(self) -> str:
        return f"{self.page}:{self.line}"


def examples(page: Path, root: Path) -> Iterator[Example]:
    """Every bash and python block of ``page`` with its directives and shown output."""
    text = page.read_text(encoding="utf-8")
    blocks = list(FENCE.finditer(text))
    for index, block in enumerate(blocks):
        if block.group(1) not in ("bash", "python"):
            continue
        skip = _directive(text[: block.start()], "example")
        output = _output_block(text, blocks, index)
        yield Example(
            page=str(page.relative_to(root)),
            line=text.count("\n", 0, block.start()) + 1,
            script=block.group(2),
            language=block.group(1),
            skip=skip.removeprefix("skip").strip() or "no reason given" if skip else None,
            output_kind=output[0] if output else None,
            output=output[1] if output else None,
            compare_values=bool(output and output[2] == "values"),
        )


def _directive(before: str, kind: str) -> str | None:
    """The ``<!-- kind: ... -->`` comment that ends ``before`` (blank lines allowed)."""
    before = before.rstrip()
    if not before.endswith("-->"):
        return None
    match = COMMENT.fullmatch(before[before.rfind("<!--") :])
    if match and match.group(1) == kind:
        return match.group(2)
    return None


def _output_block(
    text: str, blocks: list[re.Match[str]], index: int
) -> tuple[str, str, str | None] | None:
    if index + 1 >= len(blocks):
        return None
    this, after = blocks[index], blocks[index + 1]
    between = text[this.end() : after.start()]
    comment = re.fullmatch(r"\s*(<!--.*?-->)?\s*", between, re.DOTALL)
    if comment is None or after.group(1) not in ("json", "http"):
        return None
    mode = _directive(between, "output")
    return after.group(1), after.group(2), mode


def json_values(text: str) -> list[Any]:
    """The JSON values printed one after another (curl prints no newline between them); a line
    that is not JSON (a message such as ``same answer``) is passed over."""
    decoder, position = json.JSONDecoder(), 0
    values: list[Any] = []
    while True:
        while position < len(text) and text[position].isspace():
            position += 1
        if position >= len(text):
            return values
        try:
            value, position = decoder.raw_decode(text, position)
        except json.JSONDecodeError:
            newline = text.find("\n", position)
            position = len(text) if newline < 0 else newline + 1
            continue
        values.append(value)


def compare(shown: Any, actual: Any, values: bool, path: str = "$") -> list[str]:
    """Where ``actual`` does not match what the page shows (empty when it does)."""
    if isinstance(shown, dict):
        if not isinstance(actual, dict):
            return [f"{path}: shown an object, got {_kind(actual)}"]
        problems = [f"{path}: no key {key!r}" for key in shown if key not in actual]
        for key in shown.keys() & actual.keys():
            problems += compare(shown[key], actual[key], values, f"{path}.{key}")
        return problems
    if isinstance(shown, list):
        if not isinstance(actual, list):
            return [f"{path}: shown a list, got {_kind(actual)}"]
        if len(shown) > len(actual):
            return [f"{path}: shown {len(shown)} items, got {len(actual)}"]
        problems = []
        for position, item in enumerate(shown):
            problems += compare(item, actual[position], values, f"{path}[{position}]")
        return problems
    if shown is None or actual is None:
        return [] if shown is actual or not values else [f"{path}: shown {shown!r}, got {actual!r}"]
    if _kind(shown) != _kind(actual):
        return [f"{path}: shown {_kind(shown)}, got {_kind(actual)}"]
    if values and not _same_value(shown, actual):
        return [f"{path}: shown {shown!r}, got {actual!r}"]
    return []


def _same_value(shown: Any, actual: Any) -> bool:
    if isinstance(shown, float | int) and not isinstance(shown, bool):
        return math.isclose(float(shown), float(actual), abs_tol=1e-3)
    if isinstance(shown, str) and "..." in shown:  # an id or a long text, abridged
        pattern = ".*".join(re.escape(part) for part in shown.split("..."))
        return re.fullmatch(pattern, actual, re.DOTALL) is not None
    return bool(shown == actual)


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return {dict: "object", list: "list", str: "string", type(None): "null"}[type(value)]


def http_problems(shown: str, head: str) -> list[str]:
    """A shown response head against the real one: status code and header names."""
    shown_lines = [line for line in shown.strip().splitlines() if line.strip()]
    real_lines = head.strip().splitlines()
    if not real_lines:
        return ["no response head"]
    problems = []
    shown_status, real_status = shown_lines[0].split()[1], real_lines[0].split()[1]
    if shown_status != real_status:
        problems.append(f"status {real_status}, shown {shown_status}")
    real_names = {line.split(":", 1)[0].lower() for line in real_lines[1:] if ":" in line}
    for line in shown_lines[1:]:
        name = line.split(":", 1)[0].lower()
        if ":" in line and name not in real_names:
            problems.append(f"no header {name!r}")
    return problems
