"""The pure half of the trainer adapters: group a batch by prompt, read the answers back.

A trainer hands over a flat batch (prompt i, completion i); Plaudit scores a rollout group (one
prompt, its completions). :func:`group_by_prompt` turns the first into the second, keeping the
batch order inside each group, and :func:`scatter` puts each group's answer back in batch order::

    groups = group_by_prompt(["2+2?", "2+2?", "Capital?"], ["4", "5", "Paris"])
    [(g.prompt, g.indices) for g in groups]   # [('2+2?', (0, 1)), ('Capital?', (2,))]

No I/O here, and no torch.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from plaudit_wire.rewards import RewardsGroupResponse
from trainer_client.errors import PlauditError


@dataclass(frozen=True)
class Group:
    """One prompt (in its wire form) and the completions of the batch that answer it."""

    prompt: Any
    indices: tuple[int, ...]
    texts: tuple[str, ...]
    token_counts: tuple[int, ...] | None = None
    columns: dict[str, Any] | None = None

    def __len__(self) -> int:
        return len(self.indices)


@dataclass(frozen=True)
class Scored:
    """Answers per completion: one group's (in the group's order, as :func:`read_group` gives
    them) or a whole batch's (in batch order, as :func:`scatter` puts them back); one form for
    both, so a group's answer is read once and copied only into its batch positions.

    ``status`` is ``ok`` or why the completion has no total (a channel's status such as
    ``invalid``, or ``skipped``/``error``/``missing`` when its group was never scored);
    ``meta`` holds each channel's ``meta`` (judge model, template, inconsistency rate, ...),
    one entry per group.
    """

    totals: list[float | None]
    statuses: list[str]
    channels: dict[str, list[float | None]]
    errors: list[str | None]
    meta: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    @classmethod
    def unscored(cls, size: int, status: str, channels: Sequence[str], error: str) -> Scored:
        """A group without an answer: every total and channel value None."""
        return cls(
            totals=[None] * size,
            statuses=[status] * size,
            channels={name: [None] * size for name in channels},
            errors=[error] * size,
        )

    def first_failure(self) -> int | None:
        """The index of the first completion without a total, or None."""
        return next((i for i, total in enumerate(self.totals) if total is None), None)


def channel_metrics(metas: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """The mean of each numeric ``metrics`` entry over the groups' metas of one channel.

    >>> channel_metrics([{"metrics": {"pass_rate/c1": 1.0}}, {"metrics": {"pass_rate/c1": 0.5}}])
    {'pass_rate/c1': 0.75}
    """
    values: dict[str, list[float]] = {}
    for meta in metas:
        metrics = meta.get("metrics")
        if not isinstance(metrics, Mapping):
            continue
        for name, value in metrics.items():
            number = _number(value)
            if number is not None:
                values.setdefault(str(name), []).append(number)
    return {name: sum(v) / len(v) for name, v in values.items()}


def channel_names(spec: Mapping[str, Any]) -> list[str]:
    """The spec's channels, sorted: ``channel_names({"channels": {"b": {}, "a": {}}})`` is
    ``["a", "b"]``."""
    return sorted(str(name) for name in spec.get("channels", {}))


def group_by_prompt(
    prompts: Sequence[Any],
    texts: Sequence[str],
    token_counts: Sequence[int] | None = None,
    columns: Mapping[str, Sequence[Any]] | None = None,
) -> list[Group]:
    """Groups of equal prompts, in order of first appearance, each keeping the batch order.

    Prompts are compared by their wire form, so equal chat prompts group together whatever
    extra keys their messages carry. ``columns`` (dataset columns, one value per completion,
    such as a ``rubric_id``) travel with their group; rows of one prompt whose columns differ
    are separate groups.
    """
    if len(prompts) != len(texts):
        raise ValueError(f"got {len(prompts)} prompts for {len(texts)} completions")
    if token_counts is not None and len(token_counts) != len(texts):
        raise ValueError(f"got {len(token_counts)} token counts for {len(texts)} completions")
    for name, values in (columns or {}).items():
        if len(values) != len(texts):
            raise ValueError(f"column {name!r} has {len(values)} values for {len(texts)} rows")
    members: dict[str, list[int]] = {}
    wire: dict[str, Any] = {}
    row_columns: dict[str, dict[str, Any]] = {}
    for index, prompt in enumerate(prompts):
        form = prompt_wire(prompt)
        row = {name: values[index] for name, values in (columns or {}).items()}
        key = json.dumps([form, row], sort_keys=True, ensure_ascii=False, default=str)
        members.setdefault(key, []).append(index)
        wire.setdefault(key, form)
        row_columns.setdefault(key, row)
    return [
        Group(
            prompt=wire[key],
            indices=tuple(indices),
            texts=tuple(texts[i] for i in indices),
            token_counts=None if token_counts is None else tuple(token_counts[i] for i in indices),
            columns=row_columns[key] or None,
        )
        for key, indices in members.items()
    ]


def prompt_wire(prompt: Any) -> Any:
    """A prompt as Plaudit takes it: the text, or chat messages reduced to role and content.

    >>> prompt_wire([{"role": "user", "content": [{"type": "text", "text": "Hi"}], "name": "x"}])
    [{'role': 'user', 'content': 'Hi'}]
    """
    if isinstance(prompt, str):
        return prompt
    if _is_messages(prompt):
        return [
            {"role": str(m.get("role")), "content": content_text(m.get("content"))} for m in prompt
        ]
    raise TypeError(f"a prompt is a string or a list of chat messages, not {type(prompt).__name__}")


def completion_text(completion: Any) -> str:
    """The text of a completion: a string, one message, or a list of messages (TRL's
    conversational format), whose assistant turns are joined by a blank line.

    >>> completion_text([{"role": "assistant", "content": "Paris."}])
    'Paris.'
    """
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Mapping):
        return content_text(completion.get("content"))
    if _is_messages(completion):
        turns = [m for m in completion if m.get("role") == "assistant"] or list(completion)
        return "\n\n".join(content_text(m.get("content")) for m in turns)
    raise TypeError(
        f"a completion is a string or a list of chat messages, not {type(completion).__name__}"
    )


def content_text(content: Any) -> str:
    """A message's content as text: a string, or the text parts of a multimodal list."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        parts = [p if isinstance(p, str) else p.get("text") for p in content if _is_text(p)]
        return "".join(str(p) for p in parts if p is not None)
    raise TypeError(f"message content must be text or a list of parts, not {type(content)}")


def read_group(answer: Mapping[str, Any], size: int) -> Scored:
    """One ``/v1/rewards/group`` answer (read as :class:`RewardsGroupResponse`, the server's
    own wire model) as per-completion lists; ``size`` = completions sent."""
    try:
        parsed = RewardsGroupResponse.model_validate(answer)
    except ValidationError as exc:
        raise PlauditError(f"unreadable answer from /v1/rewards/group: {exc}") from None
    results = parsed.results
    if len(results) != size:
        raise PlauditError(f"expected {size} results from /v1/rewards/group, got {len(results)}")
    channels: dict[str, list[float | None]] = {}
    meta: dict[str, list[dict[str, Any]]] = {}
    errors: list[str | None] = []
    for position, result in enumerate(results):
        errors.append(None)
        for name, channel in result.channels.items():
            channels.setdefault(name, [None] * size)[position] = _number(channel.value)
            meta.setdefault(name, [channel.meta])
            if errors[-1] is None and channel.status != "ok":
                errors[-1] = f"{name}: {channel.error or channel.status}"
    return Scored(
        totals=[_number(r.total) for r in results],
        statuses=[r.status for r in results],
        channels=channels,
        errors=errors,
        meta=meta,
    )


def scatter(size: int, groups: Sequence[Group], answers: Sequence[Scored]) -> Scored:
    """Every group's answer put back at its batch positions."""
    totals: list[float | None] = [None] * size
    statuses = ["missing"] * size
    errors: list[str | None] = [None] * size
    channels: dict[str, list[float | None]] = {}
    meta: dict[str, list[dict[str, Any]]] = {}
    for group, answer in zip(groups, answers, strict=True):
        for position, index in enumerate(group.indices):
            totals[index] = answer.totals[position]
            statuses[index] = answer.statuses[position]
            errors[index] = answer.errors[position]
            for name, values in answer.channels.items():
                channels.setdefault(name, [None] * size)[index] = values[position]
        for name, metas in answer.meta.items():
            meta.setdefault(name, []).extend(metas)
    return Scored(totals, statuses, channels, errors, meta)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _is_messages(value: Any) -> bool:
    return (
        isinstance(value, Sequence)
        and not isinstance(value, str)
        and all(isinstance(m, Mapping) for m in value)
    )


def _is_text(part: Any) -> bool:
    return isinstance(part, str) or (
        isinstance(part, Mapping) and part.get("type", "text") == "text"
    )
