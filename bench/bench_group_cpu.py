"""Plaudit's own CPU for one G=8 round-robin group, step by step, in this process (issue 19).

The group route's work that grows with the group: rendering its 56 prompts (both orders of
28 pairs; again with each completion 40 lines long, as fencing reads lines), reading the
judge's batched reply (56 choices, each with its listed first tokens, as
:mod:`bench.stub_openai` answers them) and, on the rewards route, hashing each prompt's
judge cache key. Each step is timed with ``timeit`` (best
of 7) and given in milliseconds per group. Against older code, copy this file into a
worktree of that commit and run it there with ``PYTHONPATH`` set to the worktree (the
editable install points at the checkout otherwise); it reads replies with whichever
functions the code has, and prints where ``judges`` was imported from.

    .venv/bin/python -m bench.bench_group_cpu
"""

from __future__ import annotations

import argparse
import json
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

import judges
from bench.bench_overhead import request_body
from bench.common import machine
from bench.stub_openai import _completions_reply
from judges.backends import openai_replies
from judges.backends.base import BackendInfo
from judges.backends.sequence_scoring import next_token_lists
from judges.fencing import boundary_code, process_secret
from judges.templates import load_template
from services.core.cache import MemoryCache
from services.core.models.cached_judge import CachedJudge


def group_rows(index: int) -> tuple[str, list[dict[str, str]]]:
    """The question of ``bench_overhead``'s group request ``index`` and the 56 ordered pairs
    of its G=8 completions."""
    body = request_body("group", index)
    texts = body["completions"]
    rows = [
        {"response_a": a, "response_b": b}
        for i, a in enumerate(texts)
        for j, b in enumerate(texts)
        if i != j
    ]
    return body["prompt"], rows


def multiline(rows: list[dict[str, str]], lines: int = 40) -> list[dict[str, str]]:
    """The rows with each completion as ``lines`` numbered lines (a worked answer, as models
    write them), each line a slice of the one-line text: fencing reads a text line by line."""

    def lined(text: str) -> str:
        return "\n".join(f"{k + 1}. {text[(k * 7) % 120 :][:80]}" for k in range(lines))

    return [{slot: lined(text) for slot, text in row.items()} for row in rows]


def reply_body(prompts: int) -> dict[str, Any]:
    """The stand-in's answer to one ``/v1/completions`` call of ``prompts`` prompts."""
    request = orjson.dumps({"prompt": [f"p{i}" for i in range(prompts)], "max_tokens": 1})
    raw = _completions_reply(request)
    return dict(orjson.loads(raw.split(b"\r\n\r\n", 1)[1]))


def read_reply(body: dict[str, Any], candidates: tuple[str, str]) -> list[Any]:
    """Every choice's result, the way the batched backend reads them."""
    lists = next_token_lists(body, len(body["choices"]))
    assert not isinstance(lists, str), lists
    reads = getattr(openai_replies, "listed_choice", None)
    if reads is not None:
        return [reads(candidates, listed) for listed in lists]
    # Before 2b3f681: first whether a candidate is missing, then the scores.
    asked = _Asked(candidates)
    return [
        None
        if openai_replies.unlisted(asked, listed)  # type: ignore[attr-defined]
        else openai_replies.choice_from_listed(candidates, listed)
        for listed in lists
    ]


class _Served:
    """A served judge as the cache keys see it (batched, vLLM compat)."""

    info = BackendInfo(
        "openai",
        "stub-judge",
        details={"choice_mode": "batched", "choice_scoring": "sequence", "compat": "vllm"},
    )


class _Asked:
    def __init__(self, candidates: tuple[str, str]) -> None:
        self.candidates = candidates


def best_ms(step: Callable[[], object], number: int) -> float:
    return min(timeit.repeat(step, number=number, repeat=7)) / number * 1000


def group_keys(judge: CachedJudge, prompts: list[Any]) -> list[str]:
    """A group's cache keys as the judge's batch makes them: the backend's part once per
    batch where the code has it (f390ba9 on), else key by key."""
    keyer = getattr(judge, "_keyer", None)
    if keyer is None:
        return [judge.key("choices", p) for p in prompts]
    key = keyer("choices")
    return [key(p) for p in prompts]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--template", default="pairwise")
    parser.add_argument("--number", type=int, default=200, help="groups per timing")
    args = parser.parse_args()
    template = load_template(args.template)
    question, rows = group_rows(3)
    code = boundary_code(process_secret(), template.ref, question)
    prompts = template.render_many(code, rows, question=question)
    body = reply_body(len(prompts))
    keys = CachedJudge(_Served(), MemoryCache())  # type: ignore[arg-type]  # only .info is read
    # The slot letters the template chose; the stand-in lists every letter it may choose.
    candidates = (prompts[0].candidates[0], prompts[0].candidates[1])
    assert all(r is not None and r.ok for r in read_reply(body, candidates))
    long_rows = multiline(rows)
    steps = {
        "render 56 prompts": lambda: template.render_many(code, rows, question=question),
        "render 56 prompts, 40-line completions": lambda: template.render_many(
            code, long_rows, question=question
        ),
        "read a 56-choice reply": lambda: read_reply(body, candidates),
        "56 judge cache keys": lambda: group_keys(keys, prompts),
    }
    result = {
        "machine": machine(),
        "code": str(Path(judges.__file__).parent.parent),
        "template": template.ref,
        "candidates": candidates,
        "ms_per_group": {
            name: round(best_ms(step, args.number), 4) for name, step in steps.items()
        },
    }
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
