"""Plaudit as a verl reward function (``custom_reward_function``), configured from the environment.

verl loads a reward function by file path and name, and calls it with the sample only, so the
server and the spec come from environment variables (set them where the reward workers run,
e.g. ``ray_init.runtime_env.env_vars`` or before ``ray start``)::

    PLAUDIT_URL=http://127.0.0.1:8000        # default
    PLAUDIT_API_KEY=trainer-secret           # when the server has keys
    PLAUDIT_REWARD_SPEC='{"channels": {"judge_scale": {"k": 10}}}'   # or a JSON file's path
    PLAUDIT_RUN_ID=run-7                     # optional: store the scored groups for the run
    PLAUDIT_PROMPT_KEY=question              # extra_info key holding the prompt (see below)

    custom_reward_function.path=$(python -c 'import trainer_client.verl as m; print(m.__file__)')
    custom_reward_function.name=compute_score          # or compute_score_async, compute_score_batch

verl passes no prompt to a reward function, so the prompt is read from ``extra_info``
(``PLAUDIT_PROMPT_KEY``, else the first of ``prompt``, ``question``, ``problem``), as verl's own
data preprocessing scripts store it.

* :func:`compute_score` (per sample; verl's ``naive`` manager and the reward loop) and
  :func:`compute_score_async` (the reward loop awaits it) score each completion as a group of
  one, so the spec may hold only pointwise channels (``judge_scale``).
* :func:`compute_score_batch` (``reward_model.reward_manager=batch``) gets the whole batch,
  groups it by prompt and sends one request per group, so group channels (``diversity``,
  ``judge_pairwise``) work.

Each returns ``{"score": total, <channel>: value, ...}``: verl trains on ``score`` and logs the
other keys. There is no "could not score" value in verl (``None`` breaks its reward tensor and
0 would be a wrong reward), so a completion Plaudit could not score raises
:class:`~trainer_client.RewardUnavailable` (and an unreachable server, after the client's
retries, a :class:`~trainer_client.PlauditError`). verl's ``naive`` and ``batch`` managers let
it stop the step; its reward-loop managers catch reward-function errors, log them and record 0
with an ``error`` field, which is verl's policy, visible in its logs.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from trainer_client._groups import (
    BatchRewards,
    Group,
    Scored,
    group_by_prompt,
    prompt_wire,
    scatter,
)
from trainer_client._scorer import EnvScorer, GroupScorer, RewardUnavailable
from trainer_client.errors import PlauditError

__all__ = ["compute_score", "compute_score_async", "compute_score_batch", "configure", "reset"]

ENV_PROMPT_KEY = "PLAUDIT_PROMPT_KEY"
DEFAULT_PROMPT_KEYS = ("prompt", "question", "problem")

_scorer = EnvScorer()


def configure(scorer: GroupScorer, *, run_id: str | None = None) -> None:
    """Use ``scorer`` instead of the environment (tests, or a launcher that builds it)."""
    _scorer.configure(scorer, run_id)


def reset() -> None:
    """Forget the scorer: the next call reads the environment again."""
    _scorer.reset()


def compute_score(
    data_source: Any,
    solution_str: str,
    ground_truth: Any = None,
    extra_info: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> dict[str, float]:
    """One completion's reward: ``{"score": total, <channel>: value, ...}``.

    ::

        compute_score("gsm8k", "The answer is 4.", "4", {"question": "What is 2 + 2?"})
        # {'score': 8.1, 'judge_scale': 8.1}
    """
    scorer, run_id = _scorer.get()
    group = _single(scorer, solution_str, extra_info)
    return _only(group, scorer.score([group], run_id=run_id))


async def compute_score_async(
    data_source: Any,
    solution_str: str,
    ground_truth: Any = None,
    extra_info: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> dict[str, float]:
    """:func:`compute_score` on the async client, for verl's reward loop."""
    scorer, run_id = _scorer.get()
    group = _single(scorer, solution_str, extra_info)
    return _only(group, await scorer.ascore([group], run_id=run_id))


def compute_score_batch(
    data_sources: Sequence[Any],
    solution_strs: Sequence[str],
    ground_truths: Sequence[Any] | None = None,
    extra_infos: Sequence[Mapping[str, Any] | None] | None = None,
    **kwargs: Any,
) -> list[dict[str, float]]:
    """The whole batch, one request per prompt group (verl's ``batch`` reward manager).

    ::

        compute_score_batch(["gsm8k"] * 2, ["4", "5"], ["4", "4"],
                            [{"question": "2 + 2?"}] * 2)   # [{'score': ...}, {'score': ...}]
    """
    scorer, run_id = _scorer.get()
    infos = list(extra_infos) if extra_infos is not None else [None] * len(solution_strs)
    prompts = [_prompt(info) for info in infos]
    groups = group_by_prompt(prompts, list(solution_strs))
    singles = [g for g in groups if len(g) < 2]
    needs_group = scorer.group_channels() if singles else []
    if needs_group:
        raise ValueError(
            f"prompt {singles[0].prompt!r} has one completion in this batch, but the spec's "
            f"{', '.join(needs_group)} channel compares a group's completions"
        )
    answers = [_checked(a) for a in scorer.score(groups, run_id=run_id)]
    rewards = scatter(len(solution_strs), groups, answers)
    return [_sample(rewards, i) for i in range(len(solution_strs))]


def _single(scorer: GroupScorer, text: str, extra_info: Mapping[str, Any] | None) -> Group:
    needs_group = scorer.group_channels()
    if needs_group:
        raise ValueError(
            f"verl's compute_score sees one completion at a time, but the spec's "
            f"{', '.join(needs_group)} channel compares a group's completions: use "
            "compute_score_batch (reward_model.reward_manager=batch) or a pointwise spec"
        )
    return group_by_prompt([_prompt(extra_info)], [text])[0]


def _prompt(extra_info: Mapping[str, Any] | None) -> Any:
    keys = [os.environ[ENV_PROMPT_KEY]] if os.environ.get(ENV_PROMPT_KEY) else DEFAULT_PROMPT_KEYS
    if isinstance(extra_info, Mapping):
        for key in keys:
            if extra_info.get(key):
                return prompt_wire(extra_info[key])
    raise ValueError(
        f"verl passes no prompt to compute_score; put it in extra_info[{keys[0]!r}] "
        f"(looked for {', '.join(keys)}; set {ENV_PROMPT_KEY} to name another key)"
    )


def _only(group: Group, outcomes: Sequence[Scored | PlauditError]) -> dict[str, float]:
    return _sample(scatter(1, [group], [_checked(outcomes[0])]), 0)


def _checked(outcome: Scored | PlauditError) -> Scored:
    if isinstance(outcome, PlauditError):
        raise outcome
    return outcome


def _sample(rewards: BatchRewards, index: int) -> dict[str, float]:
    total = rewards.totals[index]
    if total is None:
        status = rewards.statuses[index]
        raise RewardUnavailable(
            f"Plaudit could not score completion {index}: {rewards.errors[index] or status}",
            status=status,
            index=index,
        )
    out = {"score": total}
    for name, values in sorted(rewards.channels.items()):
        value = values[index]
        if value is not None:
            out[name] = value
    return out
