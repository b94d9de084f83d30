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
(``PLAUDIT_PROMPT_KEY``, a key or a dotted path such as ``interaction_kwargs.query``; else the
first of ``prompt``, ``question``, ``problem``, ``query``, ``raw_prompt``, ``input`` and
``interaction_kwargs.query``), where verl's gsm8k and geo3k preprocessors put it. Others
(math_dataset, hellaswag, full_hh_rlhf) keep no prompt there: add it to ``extra_info`` in your
preprocessing. A row without one is *marked* like a failure (below), with a warning naming the
keys looked for, because verl's reward-loop managers turn an exception into a dict without
``score`` (``rate_limited``: ``KeyError: 'score'`` when the batch is assembled; ``remote``: the
step fails); ``PLAUDIT_VERL_ON_FAILURE=raise`` raises ``ValueError`` instead.

* :func:`compute_score` (per sample; verl's ``naive`` manager and the reward loop) and
  :func:`compute_score_async` (the reward loop awaits it) score each completion as a group of
  one, so the spec may hold only pointwise channels (``judge_scale``).
* :func:`compute_score_batch` (``reward_model.reward_manager=batch``) gets the whole batch,
  groups it by prompt and sends one request per group, so group channels (``diversity``,
  ``judge_pairwise``) work.

Each returns ``{"score": total, <channel>: value, ..., "plaudit_failed": 0.0}`` with the same
keys for every sample: verl trains on ``score`` and gathers the other keys across the batch, so
a key missing from one sample's dict breaks its assembly (``KeyError: 'score'`` under the
``rate_limited`` manager). A completion Plaudit could not score (its status says why), or a
request that failed after the client's retries, is *marked*: ``plaudit_failed: 1.0``, and
``score`` and each channel take a neutral value (the group's mean ok total in
:func:`compute_score_batch`, which gives it a zero advantage under GRPO's group normalization;
the middle of the spec's range for a lone sample), never a silent 0. ``PLAUDIT_VERL_ON_FAILURE=
raise`` raises instead (:class:`~trainer_client.RewardUnavailable`, or the client's error), for
verl's ``naive`` manager, which then stops the step. Configuration errors that concern every
row (a group spec in a per-sample function, a rejected spec) always raise.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any

from trainer_client._groups import (
    Group,
    Scored,
    group_by_prompt,
    prompt_wire,
)
from trainer_client._scorer import TRANSIENT_ERRORS, GroupScorer, RewardUnavailable, env_scorer
from trainer_client.errors import PlauditError

__all__ = ["compute_score", "compute_score_async", "compute_score_batch", "configure", "reset"]

ENV_PROMPT_KEY = "PLAUDIT_PROMPT_KEY"
DEFAULT_PROMPT_KEYS = (
    "prompt",
    "question",
    "problem",
    "query",
    "raw_prompt",
    "input",
    "interaction_kwargs.query",
)
ENV_ON_FAILURE = "PLAUDIT_VERL_ON_FAILURE"
FAILED_KEY = "plaudit_failed"

_ADAPTER = "verl"  # its scorer: env_scorer(_ADAPTER), one per process

logger = logging.getLogger(__name__)


class MissingPrompt(ValueError):
    """A row whose ``extra_info`` holds no prompt under the keys looked for."""


def configure(scorer: GroupScorer, *, run_id: str | None = None) -> None:
    """Use ``scorer`` instead of the environment (tests, or a launcher that builds it)."""
    env_scorer(_ADAPTER).configure(scorer, run_id)


def reset() -> None:
    """Forget the scorer: the next call reads the environment again."""
    env_scorer(_ADAPTER).reset()


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
    scorer, run_id = env_scorer(_ADAPTER).get()
    try:
        group = _single(scorer, solution_str, extra_info)
        return _only(scorer, scorer.score([group], run_id=run_id))
    except (MissingPrompt, RewardUnavailable, *TRANSIENT_ERRORS) as exc:
        return _marked(scorer, exc)


async def compute_score_async(
    data_source: Any,
    solution_str: str,
    ground_truth: Any = None,
    extra_info: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> dict[str, float]:
    """:func:`compute_score` on the async client, for verl's reward loop."""
    scorer, run_id = env_scorer(_ADAPTER).get()
    try:
        group = _single(scorer, solution_str, extra_info)
        return _only(scorer, await scorer.ascore([group], run_id=run_id))
    except (MissingPrompt, RewardUnavailable, *TRANSIENT_ERRORS) as exc:
        return _marked(scorer, exc)


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
    scorer, run_id = env_scorer(_ADAPTER).get()
    infos = list(extra_infos) if extra_infos is not None else [None] * len(solution_strs)
    prompts = [_prompt(info) for info in infos]
    known = [index for index, prompt in enumerate(prompts) if prompt is not None]
    groups = [
        dataclasses.replace(g, indices=tuple(known[i] for i in g.indices))
        for g in group_by_prompt([prompts[i] for i in known], [solution_strs[i] for i in known])
    ]
    singles = [g for g in groups if len(g) < 2]
    needs_group = scorer.group_channels() if singles else []
    if needs_group:
        raise ValueError(
            f"prompt {singles[0].prompt!r} has one completion in this batch, but the spec's "
            f"{', '.join(needs_group)} channel compares a group's completions"
        )
    out: list[dict[str, float]] = [{} for _ in solution_strs]
    for index, prompt in enumerate(prompts):
        if prompt is None:
            out[index] = _marked(scorer, MissingPrompt(_no_prompt_message()))
    outcomes = (
        scorer.score(groups, run_id=run_id, return_exceptions=not _raises()) if groups else []
    )
    for group, outcome in zip(groups, outcomes, strict=True):
        if isinstance(outcome, PlauditError):
            for index in group.indices:
                out[index] = _marked(scorer, outcome)
            continue
        # The group's answer is in the group's order: position i is batch index indices[i].
        for position, index in enumerate(group.indices):
            out[index] = _sample(scorer, outcome, position, batch_index=index)
    return out


def _single(scorer: GroupScorer, text: str, extra_info: Mapping[str, Any] | None) -> Group:
    needs_group = scorer.group_channels()
    if needs_group:
        raise ValueError(
            f"verl's compute_score sees one completion at a time, but the spec's "
            f"{', '.join(needs_group)} channel compares a group's completions: use "
            "compute_score_batch (reward_model.reward_manager=batch) or a pointwise spec"
        )
    prompt = _prompt(extra_info)
    if prompt is None:
        raise MissingPrompt(_no_prompt_message())
    return group_by_prompt([prompt], [text])[0]


def _prompt_keys() -> Sequence[str]:
    return [os.environ[ENV_PROMPT_KEY]] if os.environ.get(ENV_PROMPT_KEY) else DEFAULT_PROMPT_KEYS


def _prompt(extra_info: Mapping[str, Any] | None) -> Any:
    """The row's prompt in wire form, or None when ``extra_info`` holds none."""
    if isinstance(extra_info, Mapping):
        for key in _prompt_keys():
            value = _lookup(extra_info, key)
            if value:
                return prompt_wire(value)
    return None


def _no_prompt_message() -> str:
    keys = _prompt_keys()
    return (
        f"verl passes no prompt to compute_score; put it in extra_info[{keys[0]!r}] "
        f"(looked for {', '.join(keys)}; set {ENV_PROMPT_KEY} to name another key)"
    )


def _lookup(info: Mapping[str, Any], path: str) -> Any:
    """``info[path]``, or the dotted path through nested mappings; None when absent."""
    if path in info:
        return info[path]
    value: Any = info
    for part in path.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    return value


def _raises() -> bool:
    return os.environ.get(ENV_ON_FAILURE, "mark").strip().lower() == "raise"


def _only(scorer: GroupScorer, outcomes: Sequence[Scored | PlauditError]) -> dict[str, float]:
    outcome = outcomes[0]
    if isinstance(outcome, PlauditError):
        raise outcome
    return _sample(scorer, outcome, 0, batch_index=0)


def _sample(
    scorer: GroupScorer, rewards: Scored, index: int, *, batch_index: int
) -> dict[str, float]:
    """One sample's dict, with every channel of the spec and ``plaudit_failed``; a failed
    sample gets its group's mean ok total (see the module's notes) or raises."""
    fills = _midpoints(scorer)
    total = rewards.totals[index]
    if total is None:
        status = rewards.statuses[index]
        failure = RewardUnavailable(
            f"Plaudit could not score completion {batch_index}: {rewards.errors[index] or status}",
            status=status,
            index=batch_index,
        )
        if _raises():
            raise failure
        ok = [t for t in rewards.totals if t is not None]
        out = _marked(scorer, failure)
        if ok:
            out["score"] = sum(ok) / len(ok)
        return out
    out = {"score": total}
    for name in fills:
        values = rewards.channels.get(name)
        value = values[index] if values is not None else None
        out[name] = value if value is not None else fills[name]
    out[FAILED_KEY] = 0.0
    return out


def _marked(scorer: GroupScorer, failure: PlauditError | MissingPrompt) -> dict[str, float]:
    """The dict of a sample that has no reward: neutral values, flagged; or raises."""
    if _raises():
        raise failure
    if isinstance(failure, MissingPrompt):
        logger.warning("%s; the row is marked %s=1.0", failure, FAILED_KEY)
    fills = _midpoints(scorer)
    weights = {
        name: float(options.get("weight", 1.0))
        for name, options in scorer.accepted().get("spec", {}).get("channels", {}).items()
    }
    out = {"score": sum(weights.get(name, 1.0) * value for name, value in fills.items())}
    out.update(fills)
    out[FAILED_KEY] = 1.0
    return out


def _midpoints(scorer: GroupScorer) -> dict[str, float]:
    """Each channel of the spec at the middle of its range (0 when unbounded), by name."""
    ranges = scorer.accepted().get("channel_ranges", {})
    return {
        name: (float(bounds[0]) + float(bounds[1])) / 2 if bounds else 0.0
        for name, bounds in sorted(ranges.items())
    }
