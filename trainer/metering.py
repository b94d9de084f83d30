"""Count what the reward server could not score, and keep what it scored (no torch here).

TRL turns a ``None`` reward into NaN and leaves that completion out of its group's baseline
(its advantage is 0), so a failure never becomes a silent 0. :class:`MeteredReward` wraps any
TRL reward function and reports, through TRL's ``log_metric`` hook, how many completions of
each batch came back ``None``::

    reward = MeteredReward(plaudit_reward_func("http://127.0.0.1:8000", spec))
    GRPOTrainer(..., reward_funcs=reward)   # logs plaudit/failed and plaudit/scored per step
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

RewardFunc = Callable[..., list[float | None]]


@dataclass(frozen=True)
class RewardCall:
    """One call of the reward function: the completions it got and the rewards it returned."""

    prompts: list[Any]
    completions: list[Any]
    rewards: list[float | None]


class MeteredReward:
    """A TRL reward function that forwards to ``func`` and counts the ``None`` rewards.

    ``keep_calls`` stores every :class:`RewardCall` in :attr:`calls` (tests compare them with
    what the server stored). The wrapper keeps ``func``'s ``__name__``, so TRL's per-function
    metrics stay ``rewards/<name>/mean``.
    """

    def __init__(self, func: RewardFunc, *, keep_calls: bool = False) -> None:
        self._func = func
        self.__name__ = getattr(func, "__name__", "plaudit")
        self.keep_calls = keep_calls
        self.calls: list[RewardCall] = []
        self.failed = 0
        self.scored = 0

    def __call__(
        self, prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any
    ) -> list[float | None]:
        rewards = list(self._func(prompts=prompts, completions=completions, **kwargs))
        failed = sum(r is None for r in rewards)
        self.failed += failed
        self.scored += len(rewards) - failed
        log_metric = kwargs.get("log_metric")
        if callable(log_metric):
            log_metric("plaudit/failed", float(failed))
            log_metric("plaudit/scored", float(len(rewards) - failed))
        if self.keep_calls:
            self.calls.append(RewardCall(list(prompts), list(completions), rewards))
        return rewards
