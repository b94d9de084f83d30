"""From a scored rollout group to the plain numbers a trainer protocol needs (pure, no I/O).

OpenRLHF and slime need a number for every sample, while Plaudit reports a failed completion
as ``total: null`` with its status. The ``neutral`` policy fills a failed sample with the mean
of its group's ok totals: under group normalization (GRPO, RLOO, OpenRLHF's group_norm) that
is an advantage of zero, so the sample neither pushes nor pulls the policy (issue 4). The
sample stays marked as failed (``failed``/``status``), so it is never a silent 0.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from plaudit_wire.rewards import CompletionReward
from plaudit_wire.schemas import VALUED_STATUSES
from plaudit_wire.text import strip_end_markers, unit_interval
from services.core.channels import ChannelSpec
from services.rewards.spec import ResolvedSpec

#: Begin-of-text tokens a decoded query may start with before the (truncated) prompt.
_BOS = re.compile(r"^(?:<s>|<bos>|<\|begin_of_text\|>|<\|startoftext\|>|\s)*")
#: How much of the prompt's end is looked for in a query whose prompt was cut from the left.
_TAIL_CHARS = 16

#: Status of the samples of a group too small for a group channel (a lone straggler).
GROUP_TOO_SMALL = "group_too_small"


@dataclass(frozen=True)
class Located:
    """Where the prompt ends inside a query: the response, and the prompt as the policy saw it
    (``truncated``: cut from the left, so a suffix of the prompt sent beside the query)."""

    response: str
    prompt_seen: str
    truncated: bool


def locate_response(query: str, prompt: str) -> Located | None:
    """The response inside ``query``, also when the policy saw the prompt cut from the left.

    OpenRLHF truncates a prompt longer than its limit from the left before generating, but
    posts the full prompt beside the query: the query then starts with a suffix of the prompt.

    >>> locate_response("...question?<|assistant|>Yes", "Long context. The question?<|assistant|>")
    >>> located = locate_response("the question?<|assistant|>Yes",
    ...                           "A long context and the question?<|assistant|>")
    >>> (located.response, located.prompt_seen, located.truncated)
    ('Yes', 'the question?<|assistant|>', True)
    """
    response = split_response(query, prompt)
    if response is not None:
        return Located(response, prompt, truncated=False)
    start = _BOS.match(query).end()  # type: ignore[union-attr]
    body = query[start:]
    tail = prompt[-_TAIL_CHARS:]
    if not tail:
        return None
    at = body.find(tail)
    while at >= 0:
        end = at + len(tail)
        if prompt.endswith(body[:end]):
            return Located(strip_end_markers(body[end:]), body[:end], truncated=True)
        at = body.find(tail, at + 1)
    return None


def split_response(query: str, prompt: str) -> str | None:
    """The response inside an OpenRLHF query (prompt + response); None when the prompt is absent.

    The prompt is normally a prefix of the query; anything decoded before it (a BOS token) is
    skipped. Trailing end-of-turn and padding tokens are removed.

    >>> split_response("<|user|>Hi<|assistant|>Hello!<|im_end|>", "<|user|>Hi<|assistant|>")
    'Hello!'
    >>> split_response("something else", "<|user|>Hi") is None
    True
    """
    if query.startswith(prompt):
        rest = query[len(prompt) :]
    else:
        at = query.find(prompt)
        if at < 0:
            return None
        rest = query[at + len(prompt) :]
    return strip_end_markers(rest)


def unit_value(channel: ChannelSpec, value: float) -> float:
    """A channel value mapped onto [0, 1] by the channel's own range.

    judge_scale 1..K, judge_pairwise's pprgde [-1, 1] and win_rate [0, 1], diversity [0, 1]
    (clamped); unbounded values (Bradley-Terry log-strengths) go through a logistic.

    >>> from services.judge.channels import JudgeScaleSpec
    >>> unit_value(JudgeScaleSpec(k=5), 3.0)
    0.5
    """
    return unit_interval(value, channel.value_range())


def midpoint(channel: ChannelSpec) -> float:
    """The value a channel maps to 0.5 (the neutral fill of a group with no ok sample)."""
    bounds = channel.value_range()
    if bounds is None:
        return 0.0
    low, high = bounds
    return (low + high) / 2


def unit_score(spec: ResolvedSpec, values: Mapping[str, float]) -> float:
    """The weighted mean of the channels' [0, 1] values: the trainer's ``score``.

    >>> from services.rewards.spec import resolve_spec
    >>> spec = resolve_spec({"channels": {"judge_scale": {"k": 5}, "diversity": {}}})
    >>> unit_score(spec, {"judge_scale": 5.0, "diversity": 0.0})
    0.5
    """
    weights = {name: spec.channels[name].weight for name in values}
    units = {name: unit_value(spec.channels[name], v) for name, v in values.items()}
    total_weight = sum(weights.values())
    if total_weight == 0:
        return sum(units.values()) / len(units)
    return sum(weights[n] * units[n] for n in units) / total_weight


@dataclass(frozen=True)
class SampleReward:
    """One sample's numbers for a trainer.

    ``total`` is the weighted total as Plaudit computed it (None when it failed); ``reward``
    is the total, or the group's neutral value for a failed sample.
    """

    reward: float
    score: float
    total: float | None
    status: str
    channels: dict[str, float]
    group_size: int
    spec_hash: str

    @property
    def failed(self) -> bool:
        return self.total is None


def settle_group(spec: ResolvedSpec, results: Sequence[CompletionReward]) -> list[SampleReward]:
    """Trainer numbers for each completion of a scored group (failed ones filled neutrally)."""
    fills = {
        name: _mean(_ok_values(results, name), default=midpoint(channel))
        for name, channel in spec.channels.items()
    }
    ok = [r for r in results if r.total is not None]
    reward_fill = _mean([r.total for r in ok if r.total is not None], default=_total(spec, fills))
    score_fill = _mean([unit_score(spec, _values(r, fills)) for r in ok], default=0.5)
    out = []
    for r in results:
        values = _values(r, fills)
        out.append(
            SampleReward(
                reward=reward_fill if r.total is None else r.total,
                score=score_fill if r.total is None else unit_score(spec, values),
                total=r.total,
                status=r.status,
                channels=values,
                group_size=len(results),
                spec_hash=spec.hash,
            )
        )
    return out


def unscored_group(
    spec: ResolvedSpec, size: int, status: str, *, fills: Mapping[str, float] | None = None
) -> list[SampleReward]:
    """``size`` failed samples that no channel could score (a lone sample of a spec of group
    channels only): each channel at ``fills`` (its group's mean, when its group was scored
    before it) or its midpoint, so its reward is neutral."""
    fills = {
        name: (fills or {}).get(name, midpoint(channel)) for name, channel in spec.channels.items()
    }
    sample = SampleReward(
        reward=_total(spec, fills),
        score=0.5,
        total=None,
        status=status,
        channels=fills,
        group_size=size,
        spec_hash=spec.hash,
    )
    return [sample] * size


def lone_samples(
    spec: ResolvedSpec,
    results: Sequence[CompletionReward],
    status: str,
    *,
    fills: Mapping[str, float] | None = None,
) -> list[SampleReward]:
    """Samples scored alone by ``spec``'s per-sample channels (``results``); each group channel
    takes ``fills`` (its group's mean) or its midpoint. A sample whose per-sample channels
    failed stays failed."""
    out = []
    for r in results:
        values = {
            name: (fills or {}).get(name, midpoint(channel))
            for name, channel in spec.channels.items()
            if channel.needs_group
        }
        ok = r.total is not None
        for name, channel in r.channels.items():
            values[name] = (
                channel.value
                if channel.status in VALUED_STATUSES and channel.value is not None
                else midpoint(spec.channels[name])
            )
        total = _total(spec, values) if ok else None
        out.append(
            SampleReward(
                reward=total if total is not None else _total(spec, values),
                score=unit_score(spec, values),
                total=total,
                status=status if ok else r.status,
                channels=values,
                group_size=len(results),
                spec_hash=spec.hash,
            )
        )
    return out


class RecentGroups:
    """The channel means of the groups scored last, by group key, so a straggler that arrives
    after its group was scored gets its group's values (bounded: the oldest are forgotten)."""

    def __init__(self, capacity: int = 4096) -> None:
        self._capacity = capacity
        self._means: dict[object, dict[str, float]] = {}

    def remember(self, key: object, samples: Sequence[SampleReward]) -> None:
        ok = [s for s in samples if not s.failed]
        if not ok:
            return
        self._means.pop(key, None)
        self._means[key] = {
            name: sum(s.channels[name] for s in ok) / len(ok) for name in ok[0].channels
        }
        while len(self._means) > self._capacity:
            self._means.pop(next(iter(self._means)))

    def get(self, key: object) -> dict[str, float] | None:
        return self._means.get(key)


def _ok_values(results: Sequence[CompletionReward], name: str) -> list[float]:
    out = []
    for r in results:
        channel = r.channels[name]
        if channel.status in VALUED_STATUSES and channel.value is not None:
            out.append(channel.value)
    return out


def _values(result: CompletionReward, fills: Mapping[str, float]) -> dict[str, float]:
    out = {}
    for name, fill in fills.items():
        channel = result.channels[name]
        out[name] = (
            channel.value
            if channel.status in VALUED_STATUSES and channel.value is not None
            else fill
        )
    return out


def _total(spec: ResolvedSpec, values: Mapping[str, float]) -> float:
    return float(sum(spec.channels[name].weight * v for name, v in values.items()))


def _mean(values: Sequence[float], *, default: float) -> float:
    return float(sum(values) / len(values)) if values else default
