"""The group-CPU bench measures real work: 56 prompts rendered, 56 choices read as scored."""

from __future__ import annotations

from bench.bench_group_cpu import (
    _Served,
    group_keys,
    group_rows,
    multiline,
    read_reply,
    reply_body,
)
from judges.templates import load_template
from services.core.cache import MemoryCache
from services.core.models.cached_judge import CachedJudge


def test_a_group_renders_56_prompts_and_its_reply_reads_56_scored_choices() -> None:
    template = load_template("pairwise")
    question, rows = group_rows(5)
    prompts = template.render_many(None, rows, question=question)
    assert len(prompts) == 56 and len({p.messages[-1]["content"] for p in prompts}) == 56
    a, b = prompts[0].candidates
    results = read_reply(reply_body(len(prompts)), (a, b))
    assert len(results) == 56
    assert all(r is not None and r.ok and r.probs[0] != r.probs[1] for r in results)


def test_the_keys_it_times_are_the_served_judges_keys_one_per_prompt() -> None:
    question, rows = group_rows(5)
    prompts = load_template("pairwise").render_many(None, rows, question=question)
    keys = CachedJudge(_Served(), MemoryCache())  # type: ignore[arg-type]
    timed = group_keys(keys, prompts)
    assert timed == [keys.key("choices", p) for p in prompts] and len(set(timed)) == 56


def test_its_long_completions_are_40_lines_each_in_every_slot() -> None:
    _, rows = group_rows(5)
    long_rows = multiline(rows)
    assert len(long_rows) == 56
    assert all(text.count("\n") == 39 for row in long_rows for text in row.values())
