"""Plaudit as an OpenRLHF reward function file (``--remote_rm_url path/to/file.py``).

OpenRLHF loads ``reward_func(queries, prompts, labels)`` from the file it is given, where a
query is the prompt followed by the response, and expects ``{"rewards": tensor, "scores":
tensor, "extra_logs": {name: tensor}}``. Point it at this module's file, and configure the server
and the spec with environment variables (``PLAUDIT_URL``, ``PLAUDIT_API_KEY``,
``PLAUDIT_REWARD_SPEC`` as JSON or a JSON file's path, optional ``PLAUDIT_RUN_ID``), set where
the reward function runs (``--runtime-env-json`` for Ray jobs)::

    --remote_rm_url $(python -c 'import trainer_client.openrlhf as m; print(m.__file__)')

Samples of the same prompt in one call are one group and one ``POST /v1/rewards/group``. Which
samples share a call is OpenRLHF's choice: batches of ``micro_rollout_batch_size`` (or
``remote_rm_batch_size``) in the versions that batch, one sample per call in those that score
each sample right after its rollout. Group channels (``diversity``, ``judge_pairwise``) need
every completion of a group in the same call. OpenRLHF at HEAD calls ``reward_func`` one
sample at a time, so a spec with a group channel is refused on the first call with a message
that names the way that works: ``--remote_rm_url http://HOST/get_reward?group_size=N``, where
the server gathers each prompt's samples. Set ``PLAUDIT_OPENRLHF_WHOLE_GROUPS=true`` only for
an OpenRLHF that passes whole groups per call (older batching releases). Pointwise specs
(``judge_scale``, ``rubric``) work either way.

``rewards`` are the weighted totals; ``scores`` are the same totals mapped onto 0..1 (each
channel by its value range, then the weighted mean, as the server's ``/get_reward`` does), the
range OpenRLHF's dynamic filtering expects. Trailing end-of-turn and padding tokens
(``<|im_end|>``, ``</s>``, ...) are dropped from each response, and a chat-templated prompt is
turned back into its conversation (:func:`judged_prompt`), as on the server.
``extra_logs`` holds each channel's values
(``plaudit/<channel>``) and the metrics channels report per group
(``plaudit/rubric/pass_rate/required``, ...). With ``PLAUDIT_LABEL_COLUMN=rubric_id`` each
sample's label is sent as its ``rubric_id`` column, so the ``rubric`` channel scores it with
its own rubric. OpenRLHF has no "could not score" value (a NaN would poison its group
normalization, a 0 would be a wrong reward), so a completion Plaudit could not score raises
:class:`~trainer_client.RewardUnavailable`. torch is imported inside :func:`reward_func` only:
``trainer_client`` never imports it at import time.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from plaudit_wire.templates import unwrap_prompt
from plaudit_wire.text import strip_end_markers, unit_interval
from trainer_client._groups import (
    Group,
    Scored,
    channel_metrics,
    group_by_prompt,
    scatter,
)
from trainer_client._scorer import GroupScorer, RewardUnavailable, env_scorer
from trainer_client.errors import PlauditError

__all__ = ["configure", "reset", "response_text", "reward_func", "sample_metrics"]

#: Sends OpenRLHF's labels as this dataset column (``rubric_id``: each sample's rubric).
ENV_LABEL_COLUMN = "PLAUDIT_LABEL_COLUMN"
#: Declares that this OpenRLHF passes every sample of a prompt in one call.
ENV_WHOLE_GROUPS = "PLAUDIT_OPENRLHF_WHOLE_GROUPS"
#: The server's switches for chat-template unwrapping, read here too so that both agree.
ENV_UNWRAP = "PLAUDIT_PROTOCOLS_UNWRAP_TEMPLATES"
ENV_KEEP_SYSTEM = "PLAUDIT_PROTOCOLS_KEEP_SYSTEM_PROMPT"

_ADAPTER = "openrlhf"  # its scorer: env_scorer(_ADAPTER), one per process


def configure(scorer: GroupScorer, *, run_id: str | None = None) -> None:
    """Use ``scorer`` instead of the environment (tests, or a launcher that builds it)."""
    env_scorer(_ADAPTER).configure(scorer, run_id)


def reset() -> None:
    """Forget the scorer: the next call reads the environment again."""
    env_scorer(_ADAPTER).reset()


def reward_func(
    queries: Sequence[str],
    prompts: Sequence[str],
    labels: Sequence[Any] | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """Rewards for OpenRLHF: one request per prompt group of this call.

    ::

        out = reward_func(["2+2? 4", "2+2? 5"], ["2+2?", "2+2?"], ["4", "4"])
        out["rewards"]   # tensor([7.9, 2.2])
        out["extra_logs"]["plaudit/judge_scale"]
    """
    import torch  # OpenRLHF needs tensors; trainer_client must not import torch on import.

    scorer, run_id = env_scorer(_ADAPTER).get()
    if len(queries) != len(prompts):
        raise ValueError(f"got {len(queries)} queries for {len(prompts)} prompts")
    texts = [response_text(q, p) for q, p in zip(queries, prompts, strict=True)]
    judged = [judged_prompt(p) for p in prompts]
    groups = group_by_prompt(judged, texts, columns=_label_column(labels, len(texts)))
    needs_group = scorer.group_channels()
    whole_groups = os.environ.get(ENV_WHOLE_GROUPS, "").lower() in ("1", "true", "yes")
    if needs_group and not whole_groups:
        raise ValueError(
            f"the spec's {', '.join(needs_group)} channel compares a prompt's samples, and "
            "OpenRLHF calls a reward file one sample at a time: use the server's buffering "
            "route instead (--remote_rm_url 'http://HOST:8000/get_reward?group_size=N' with the "
            f"spec in PLAUDIT_PROTOCOLS_SPEC), or set {ENV_WHOLE_GROUPS}=true if your OpenRLHF "
            "passes whole groups per call"
        )
    single = next((g for g in groups if len(g) < 2), None)
    if needs_group and single is not None:
        raise ValueError(
            f"this call holds one sample of prompt {single.prompt!r:.80}, but the spec's "
            f"{', '.join(needs_group)} channel compares a group's completions: send every "
            "sample of a prompt in one call, or use a pointwise spec"
        )
    answers = scorer.score(groups, run_id=run_id)
    for answer in answers:
        if isinstance(answer, PlauditError):
            raise answer
    scored = [a for a in answers if not isinstance(a, PlauditError)]
    rewards = scatter(len(texts), groups, scored)
    missing = rewards.first_failure()
    if missing is not None:
        raise RewardUnavailable(
            f"Plaudit could not score sample {missing}: "
            f"{rewards.errors[missing] or rewards.statuses[missing]}",
            status=rewards.statuses[missing],
            index=missing,
        )
    totals = torch.tensor(rewards.totals, dtype=torch.float32)
    units = torch.tensor(unit_scores(rewards, scorer.accepted()), dtype=torch.float32)
    extra_logs = {
        f"plaudit/{name}": torch.tensor(values, dtype=torch.float32)
        for name, values in sorted(rewards.channels.items())
    }
    for name, values in sorted(sample_metrics(groups, scored, len(texts)).items()):
        extra_logs[f"plaudit/{name}"] = torch.tensor(values, dtype=torch.float32)
    return {"rewards": totals, "scores": units, "extra_logs": extra_logs}


def unit_scores(rewards: Scored, verdict: Mapping[str, Any]) -> list[float]:
    """Each sample's total on 0..1: every channel mapped by its range (a logistic when
    unbounded), then weighted as in the spec.

    >>> from trainer_client._groups import Scored
    >>> batch = Scored([6.0], ["ok"], {"judge_scale": [6.0]}, [None], {})
    >>> verdict = {"spec": {"channels": {"judge_scale": {"weight": 1.0}}},
    ...            "channel_ranges": {"judge_scale": [1.0, 11.0]}}
    >>> unit_scores(batch, verdict)
    [0.5]
    """
    channels = verdict.get("spec", {}).get("channels", {})
    ranges = verdict.get("channel_ranges", {})
    weights = {name: float(channels.get(name, {}).get("weight", 1.0)) for name in rewards.channels}
    total_weight = sum(weights.values())
    out = []
    for index in range(len(rewards.totals)):
        units = {
            name: _unit(values[index], ranges.get(name))
            for name, values in rewards.channels.items()
        }
        if total_weight == 0:
            out.append(sum(units.values()) / len(units) if units else 0.5)
        else:
            out.append(sum(weights[n] * u for n, u in units.items()) / total_weight)
    return out


def sample_metrics(
    groups: Sequence[Group], answers: Sequence[Scored], size: int
) -> dict[str, list[float]]:
    """Each channel metric (``<channel>/<metric>``, e.g. ``rubric/pass_rate/required``) as one
    value per sample, its group's, for the metrics every group reported (OpenRLHF averages
    ``extra_logs``, so a missing value cannot be filled)."""
    out: dict[str, list[float]] = {}
    per_group = [
        {
            f"{channel}/{metric}": value
            for channel, metas in answer.meta.items()
            for metric, value in channel_metrics(metas).items()
        }
        for answer in answers
    ]
    shared = set.intersection(*(set(m) for m in per_group)) if per_group else set()
    for name in shared:
        values = [0.0] * size
        for group, metrics in zip(groups, per_group, strict=True):
            for index in group.indices:
                values[index] = metrics[name]
        out[name] = values
    return out


def _label_column(labels: Sequence[Any] | None, size: int) -> dict[str, list[Any]] | None:
    """OpenRLHF's labels sent as the dataset column ``PLAUDIT_LABEL_COLUMN`` names (e.g.
    ``rubric_id`` for rubric rewards), when it is set."""
    name = os.environ.get(ENV_LABEL_COLUMN)
    if not name or labels is None or len(labels) != size:
        return None
    return {name: [None if v is None else str(v) for v in labels]}


def _unit(value: float | None, bounds: Sequence[float] | None) -> float:
    return 0.5 if value is None else unit_interval(value, bounds)


def judged_prompt(prompt: str) -> Any:
    """The prompt as the judge sees it: a chat-templated prompt unwrapped into its conversation
    exactly as the server's ``/get_reward`` does (issue 22), unless
    ``PLAUDIT_PROTOCOLS_UNWRAP_TEMPLATES=false``.

    >>> judged_prompt("<|im_start|>system\\nBe brief.<|im_end|>\\n"
    ...               "<|im_start|>user\\n2+2?<|im_end|>\\n<|im_start|>assistant\\n")
    '2+2?'
    """
    if not _env_flag(ENV_UNWRAP, default=True):
        return prompt
    return unwrap_prompt(prompt, keep_system=_env_flag(ENV_KEEP_SYSTEM, default=False)).prompt


def _env_flag(name: str, *, default: bool) -> bool:
    value = os.environ.get(name)
    return default if value is None else value.strip().lower() in ("1", "true", "yes", "on")


def response_text(query: str, prompt: str) -> str:
    """The response part of an OpenRLHF query (the prompt followed by the response).

    >>> response_text("Q: 2+2? A: 4", "Q: 2+2?")
    ' A: 4'
    """
    if prompt and query.startswith(prompt):
        return strip_end_markers(query[len(prompt) :])
    at = query.find(prompt) if prompt else -1
    return strip_end_markers(query[at + len(prompt) :] if at >= 0 else query)
