"""Plaudit as a TRL ``GRPOTrainer`` reward function: one HTTP request per rollout group.

TRL calls a reward function as ``func(prompts=..., completions=..., completion_ids=...,
trainer_state=..., log_metric=..., log_extra=..., **dataset_columns)`` and reads back one float
per completion, ``None`` meaning "could not score" (TRL turns it into NaN and leaves that
completion out of its group's statistics). :func:`plaudit_reward_func` builds such a function::

    from trl import GRPOConfig, GRPOTrainer
    from trainer_client.rewards import plaudit_reward_func

    spec = {"channels": {"diversity": {"weight": 0.5}, "judge_scale": {"weight": 1.0, "k": 10}}}
    reward = plaudit_reward_func("http://127.0.0.1:8000", spec, run_id="run-7")
    trainer = GRPOTrainer(model=..., reward_funcs=reward, args=GRPOConfig(...), ...)

The batch is grouped by prompt (TRL repeats each prompt ``num_generations`` times) and each
group is one ``POST /v1/rewards/group``, tagged with ``run_id`` and the step being computed
(``trainer_state.global_step + 1``: the 1-based step TRL logs).

**Split groups.** Under several processes TRL gives each process a contiguous slice of the
generation batch and gathers the rewards afterwards, so a group is cut in two whenever the
per-process slice (``per_device_train_batch_size * steps_per_generation``) is not a multiple of
``num_generations``. Each process then sends the part of the group it holds: pointwise channels
(``judge_scale``) are unaffected, but group channels (``diversity``, ``judge_pairwise``) compare
a completion only with that part, and a part of one completion cannot be compared at all, so it
gets ``None`` (with a warning). Pass ``num_generations`` to be warned whenever a part is short.
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from trainer_client._groups import (
    Group,
    Scored,
    channel_metrics,
    channel_names,
    completion_text,
    group_by_prompt,
    scatter,
)
from trainer_client._scorer import DEFAULT_TIMEOUT, ClientConfig, GroupScorer
from trainer_client.client import TimeoutLike
from trainer_client.config import RetryPolicy
from trainer_client.errors import PlauditError

__all__ = ["AsyncPlauditReward", "PlauditReward", "plaudit_reward_func"]

log = logging.getLogger(__name__)

OnError = Literal["raise", "none"]
Rewards = list[float | None]


def plaudit_reward_func(
    base_url: str,
    spec: Mapping[str, Any],
    *,
    api_key: str | None = None,
    run_id: str | None = None,
    name: str = "plaudit",
    timeout: TimeoutLike = None,
    asynchronous: bool = False,
    on_error: OnError = "raise",
    num_generations: int | None = None,
    concurrency: int = 8,
    retry: RetryPolicy | None = None,
    columns: Sequence[str] = ("rubric_id",),
) -> PlauditReward | AsyncPlauditReward:
    """A TRL reward function scoring each group of the batch with ``spec`` on a Plaudit server.

    ``spec`` must ask for rewards (``"advantage": "none"``, the default): GRPO normalizes each
    group itself. ``name`` is the function's ``__name__``, under which TRL logs it
    (``rewards/<name>/mean``). ``timeout``: seconds (or a :class:`~trainer_client.Timeouts`) to
    wait for each group's answer, default five minutes. ``on_error``: a request that still fails
    after the client's retries (server down, timeout, 5xx) raises (``"raise"``, the default:
    training stops rather than learn from nothing) or gives ``None`` to its whole group
    (``"none"``); a rejected request (a 4xx: bad spec, bad key) always raises. A completion a
    channel could not score is always ``None``, never 0. ``concurrency`` bounds the groups in
    flight. ``asynchronous=True`` returns an :class:`AsyncPlauditReward`, which TRL awaits
    alongside its other async reward functions. ``columns``: the dataset columns (TRL passes
    every column to reward functions) sent with each group for the channels that read them; by
    default ``rubric_id``, so a dataset with a ``rubric_id`` column scores each prompt with its
    own rubric under ``{"channels": {"rubric": {}}}``. Columns the dataset lacks are not sent.

    The function is picklable (its HTTP client is made lazily, per process), reports each
    channel's batch mean through TRL's ``log_metric`` (``<name>/channels/<channel>``) and each
    completion's channel values through ``log_extra`` (``<name>/<channel>``), and the
    metrics a channel reports in its meta (the rubric channel's pass rates) through
    ``log_metric`` as ``<name>/<channel>/<metric>``, averaged over the batch's groups::

        reward = plaudit_reward_func("http://127.0.0.1:8000", {"channels": {"judge_scale": {}}})
        reward(prompts=["2+2?", "2+2?"], completions=["4", "5"])   # [7.9, 2.2]
    """
    if on_error not in ("raise", "none"):
        raise ValueError(f'on_error must be "raise" or "none", not {on_error!r}')
    if num_generations is not None and num_generations < 1:
        raise ValueError("num_generations must be >= 1")
    config = ClientConfig(
        base_url=base_url,
        api_key=api_key,
        timeout=DEFAULT_TIMEOUT if timeout is None else timeout,
        retry=retry,
        concurrency=concurrency,
    )
    reward = PlauditReward(
        GroupScorer(config, spec),
        name=name,
        run_id=run_id,
        on_error=on_error,
        num_generations=num_generations,
        columns=columns,
    )
    return AsyncPlauditReward(reward) if asynchronous else reward


@dataclass(frozen=True)
class _Batch:
    """One call's batch, grouped: the groups to send and the ones that cannot be scored."""

    size: int
    groups: list[Group]
    to_send: list[Group]
    step: int | None


class PlauditReward:
    """The blocking TRL reward function (see :func:`plaudit_reward_func`).

    ``validate()`` asks the server to check the spec before training; ``close()`` closes the
    HTTP client of this process.
    """

    def __init__(
        self,
        scorer: GroupScorer,
        *,
        name: str = "plaudit",
        run_id: str | None = None,
        on_error: OnError = "raise",
        num_generations: int | None = None,
        columns: Sequence[str] = ("rubric_id",),
    ) -> None:
        self.__name__ = name
        self.scorer = scorer
        self.run_id = run_id
        self.on_error = on_error
        self.num_generations = num_generations
        self.columns = tuple(columns)
        self._warned: set[str] = set()

    def __repr__(self) -> str:
        return f"PlauditReward(name={self.__name__!r}, url={self.scorer.config.base_url!r})"

    def __call__(
        self, prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any
    ) -> Rewards:
        batch = self._prepare(prompts, completions, kwargs)
        outcomes = self.scorer.score(
            batch.to_send,
            run_id=self.run_id,
            step=batch.step,
            return_exceptions=self.on_error == "none",
        )
        return self._finish(batch, outcomes, kwargs)

    async def acall(
        self, prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any
    ) -> Rewards:
        """The same as calling it, on the async client of the running loop."""
        batch = self._prepare(prompts, completions, kwargs)
        outcomes = await self.scorer.ascore(
            batch.to_send,
            run_id=self.run_id,
            step=batch.step,
            return_exceptions=self.on_error == "none",
        )
        return self._finish(batch, outcomes, kwargs)

    def validate(self) -> dict[str, Any]:
        """The server's check of the spec: ``{"valid": True, "spec_hash": ...}`` or errors."""
        return self.scorer.validate()

    def close(self) -> None:
        self.scorer.close()

    def _prepare(
        self, prompts: Sequence[Any], completions: Sequence[Any], kwargs: Mapping[str, Any]
    ) -> _Batch:
        texts = [completion_text(c) for c in completions]
        groups = group_by_prompt(
            prompts,
            texts,
            _token_counts(kwargs, len(texts)),
            _dataset_columns(kwargs, self.columns, len(texts)),
        )
        short = [g for g in groups if self.num_generations and len(g) != self.num_generations]
        if short:
            self._warn_once(
                "short",
                "%s: %d group(s) of this batch hold fewer or more than num_generations=%d "
                "completions (TRL split them across processes); group channels see only part",
                len(short),
                self.num_generations,
            )
        # Only a batch with a lone completion needs to know (the server says, once).
        needs = self.scorer.group_channels() if any(len(g) < 2 for g in groups) else []
        to_send = [g for g in groups if len(g) > 1 or not needs]
        if len(to_send) < len(groups):
            self._warn_once(
                "single",
                "%s: a group part of 1 completion cannot be scored by %s; it gets None. Make "
                "per_device_train_batch_size * steps_per_generation a multiple of num_generations",
                ", ".join(needs),
            )
        # TRL computes rewards for optimizer step global_step + 1 (its logs, and plaudit
        # train's step lines, count from 1): store that number, so a run's stored steps are the
        # ones its log printed (issue 10).
        done = getattr(kwargs.get("trainer_state"), "global_step", None)
        step = done + 1 if isinstance(done, int) and not isinstance(done, bool) else None
        return _Batch(len(texts), groups, to_send, step)

    def _finish(
        self,
        batch: _Batch,
        outcomes: Sequence[Scored | PlauditError],
        kwargs: Mapping[str, Any],
    ) -> Rewards:
        answers = dict(zip((id(g) for g in batch.to_send), outcomes, strict=True))
        names = channel_names(self.scorer.spec)
        scored = [self._answer(g, answers.get(id(g)), names) for g in batch.groups]
        rewards = scatter(batch.size, batch.groups, scored)
        self._log(rewards, kwargs)
        return rewards.totals

    def _answer(
        self, group: Group, outcome: Scored | PlauditError | None, names: list[str]
    ) -> Scored:
        if isinstance(outcome, Scored):
            return outcome
        if outcome is None:
            return Scored.unscored(len(group), "skipped", names, "a group channel needs 2+")
        log.warning("%s: a group got None rewards: %s", self.__name__, outcome)
        return Scored.unscored(len(group), "error", names, str(outcome))

    def _log(self, rewards: Scored, kwargs: Mapping[str, Any]) -> None:
        log_metric, log_extra = kwargs.get("log_metric"), kwargs.get("log_extra")
        for channel, values in sorted(rewards.channels.items()):
            if callable(log_extra):
                log_extra(f"{self.__name__}/{channel}", list(values))
            if not callable(log_metric):
                continue
            mean = _mean(values)
            if mean is not None:
                log_metric(f"{self.__name__}/channels/{channel}", mean)
            rates = [m.get("inconsistency_rate") for m in rewards.meta.get(channel, [])]
            rate = _mean(rates)
            if rate is not None:
                log_metric(f"{self.__name__}/{channel}/inconsistency_rate", rate)
            for metric, value in sorted(channel_metrics(rewards.meta.get(channel, [])).items()):
                log_metric(f"{self.__name__}/{channel}/{metric}", value)

    def _warn_once(self, key: str, message: str, *args: Any) -> None:
        if key not in self._warned:
            self._warned.add(key)
            log.warning(message, self.__name__, *args)


async def _acall(
    reward: PlauditReward, prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any
) -> Rewards:
    return await reward.acall(prompts, completions, **kwargs)


class AsyncPlauditReward(functools.partial[Awaitable[Rewards]]):
    """The async TRL reward function: calling it returns a coroutine of the rewards.

    It is a ``functools.partial`` over a coroutine function, so ``inspect.iscoroutinefunction``
    and ``asyncio.iscoroutinefunction`` (which TRL uses to pick its async path) recognize it on
    every Python version; a plain object with ``async def __call__`` is recognized only on
    3.12+, and only when marked. ``reward`` is the underlying :class:`PlauditReward`::

        reward = plaudit_reward_func(url, spec, asynchronous=True)
        rewards = await reward(prompts=["2+2?", "2+2?"], completions=["4", "5"])
    """

    __name__: str

    def __new__(cls, reward: PlauditReward) -> AsyncPlauditReward:
        self = super().__new__(cls, _acall, reward)
        self.__name__ = reward.__name__
        return self

    def __reduce__(self) -> tuple[Callable[..., AsyncPlauditReward], tuple[PlauditReward]]:
        return (AsyncPlauditReward, (self.reward,))

    def __repr__(self) -> str:
        return f"AsyncPlauditReward({self.reward!r})"

    @property
    def reward(self) -> PlauditReward:
        reward: PlauditReward = self.args[0]
        return reward


def _token_counts(kwargs: Mapping[str, Any], size: int) -> list[int] | None:
    """Completion lengths from TRL's ``completion_ids`` (one token id list per completion)."""
    ids = kwargs.get("completion_ids")
    if not isinstance(ids, Sequence) or len(ids) != size:
        return None
    if not all(hasattr(row, "__len__") for row in ids):
        return None
    return [len(row) for row in ids]


def _dataset_columns(
    kwargs: Mapping[str, Any], names: Sequence[str], size: int
) -> dict[str, list[Any]] | None:
    """The requested dataset columns TRL passed (one value per completion), if any."""
    found = {}
    for name in names:
        values = kwargs.get(name)
        if isinstance(values, Sequence) and not isinstance(values, str) and len(values) == size:
            found[name] = [_column_value(v) for v in values]
    return found or None


def _column_value(value: Any) -> Any:
    return value if value is None or isinstance(value, str | int | float | bool) else str(value)


def _mean(values: Sequence[Any]) -> float | None:
    numbers = [float(v) for v in values if isinstance(v, int | float) and math.isfinite(v)]
    return sum(numbers) / len(numbers) if numbers else None
