"""Trainer protocols: OpenRLHF's and slime's remote reward calls, over the rewards service.

Both trainers post one sample per request. Samples are grouped by prompt; when the spec has a
group channel (judge_pairwise, diversity) the group is gathered in a :class:`GroupBuffer`
until the trainer's group size arrives or the wait runs out, then scored once with
:meth:`RewardsService.group` (and stored for the run like ``/v1/rewards/group`` does). With
per-sample channels only, a request is scored at once.

A failed sample (``total: null``) follows the failure policy: ``neutral`` gives it the mean of
its group's ok totals (zero advantage under group normalization) and marks it failed;
``error`` answers 503 with Retry-After so the trainer's client retries.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from plaudit_wire.protocols import (
    FailurePolicy,
    OpenRLHFRequest,
    OpenRLHFResponse,
    SlimeRequest,
    SlimeResponse,
)
from plaudit_wire.rewards import RewardsGroupRequest, RewardsGroupResponse
from plaudit_wire.schemas import CompletionItem, Prompt
from plaudit_wire.text import strip_end_markers
from plaudit_wire.unicode_check import find_surrogates
from services.core.db.records import content_hash
from services.core.errors import BackendUnavailable, InvalidInput
from services.protocols.buffer import GroupBuffer, Settle
from services.protocols.in_flight import GroupsInFlight
from services.protocols.scoring import (
    GROUP_TOO_SMALL,
    RecentGroups,
    SampleReward,
    locate_response,
    lone_samples,
    settle_group,
    unscored_group,
)
from services.protocols.settings import ProtocolsSettings
from services.protocols.shared_buffer import RedisGroupBuffer
from services.protocols.templates import unwrap_prompt
from services.rewards.service import RewardsService
from services.rewards.spec import ResolvedSpec

log = logging.getLogger(__name__)

#: The spec used when neither the request nor PLAUDIT_PROTOCOLS_SPEC names one.
DEFAULT_SPEC: dict[str, Any] = {"channels": {"judge_scale": {"weight": 1.0}}}
#: Retry-After (seconds) of the 503 that the ``error`` policy answers.
RETRY_AFTER_S = 5.0


@dataclass(frozen=True)
class ProtocolOptions:
    """How one protocol request is scored: from its query parameters over the settings."""

    spec: ResolvedSpec
    group_size: int
    wait_s: float
    on_failure: FailurePolicy
    run_id: str | None = None
    step: int | None = None
    eval_group_size: int | None = None
    """The trainer's evaluation samples per prompt: such a group settles after ``settle_s``."""
    settle_s: float = 10.0

    @property
    def settle(self) -> Settle | None:
        """The rule that scores an evaluation-sized group without waiting out ``wait_s``."""
        if self.eval_group_size is None or self.eval_group_size >= self.group_size:
            return None
        return Settle(self.eval_group_size, self.settle_s)

    @property
    def buffered(self) -> bool:
        """Whether samples wait for their group (a group channel in the spec)."""
        return bool(self.spec.group_channels)


@dataclass(frozen=True)
class Sample:
    prompt: Prompt
    response: str
    truncated: bool = False
    """The policy saw the prompt cut from the left; the judge sees the same cut."""


@dataclass(frozen=True)
class GroupKey:
    """Samples belong to one group when prompt, spec, run, step and group size agree."""

    prompt_hash: str
    spec_hash: str
    run_id: str | None
    step: int | None
    size: int
    prompt: Prompt = field(compare=False)
    spec: ResolvedSpec = field(compare=False)


class ProtocolService:
    """Scores trainer-protocol requests; the buffer of waiting samples lives here.

    Example::

        service = ProtocolService(rewards, settings)
        options = service.options(spec='{"channels": {"diversity": {}}}', group_size=8)
        response = await service.openrlhf(OpenRLHFRequest(query=[q], prompts=[p]), options)
        response.rewards  # one number per query, never a silent 0
    """

    def __init__(
        self, rewards: RewardsService, settings: ProtocolsSettings, *, redis_url: str | None = None
    ) -> None:
        self._rewards = rewards
        self._settings = settings
        # Checked now, so a bad PLAUDIT_PROTOCOLS_SPEC stops the server at start-up.
        self._default_spec = protocol_spec(settings.spec or DEFAULT_SPEC, rewards)
        self._buffer: (
            GroupBuffer[GroupKey, str, SampleReward] | RedisGroupBuffer[GroupKey, SampleReward]
        )
        if redis_url and settings.shared_buffer:
            # Replicas sharing Redis gather a prompt's samples wherever they land.
            self._buffer = RedisGroupBuffer(
                redis_url,
                self._score_group,
                group_id=_group_id,
                encode=dataclasses.asdict,
                decode=lambda raw: SampleReward(**raw),
            )
        else:
            self._buffer = GroupBuffer(self._score_group)
        self._recent = RecentGroups()
        self._in_flight = GroupsInFlight()

    def options(
        self,
        *,
        spec: str | None = None,
        group_size: int | None = None,
        wait_s: float | None = None,
        on_failure: FailurePolicy | None = None,
        run_id: str | None = None,
        step: int | None = None,
        eval_group_size: int | None = None,
        settle_s: float | None = None,
    ) -> ProtocolOptions:
        """Query parameters over the server's settings; a bad spec or group size is a 422."""
        resolved = (
            self._default_spec if spec is None else protocol_spec(_parse_spec(spec), self._rewards)
        )
        size = group_size if group_size is not None else self._settings.group_size
        options = ProtocolOptions(
            spec=resolved,
            group_size=size or 1,
            wait_s=wait_s if wait_s is not None else self._settings.group_wait_s,
            on_failure=on_failure or self._settings.on_failure,
            run_id=run_id,
            step=step,
            eval_group_size=(
                eval_group_size if eval_group_size is not None else self._settings.eval_group_size
            ),
            settle_s=settle_s if settle_s is not None else self._settings.settle_s,
        )
        if (
            options.buffered
            and options.eval_group_size is not None
            and options.eval_group_size > options.group_size
        ):
            raise InvalidInput(
                f"eval_group_size ({options.eval_group_size}) is larger than group_size "
                f"({options.group_size}): a group is scored as soon as it holds group_size "
                "samples, so evaluation groups would be split; set group_size to at least the "
                "evaluation's samples per prompt",
                param="eval_group_size",
            )
        if options.buffered and options.group_size < 2:
            names = ", ".join(resolved.group_channels)
            raise InvalidInput(
                f"the spec's group channels ({names}) compare a prompt's samples: set "
                "group_size to the trainer's samples per prompt (at least 2), as a query "
                "parameter or PLAUDIT_PROTOCOLS_GROUP_SIZE",
                param="group_size",
            )
        return options

    async def openrlhf(
        self, request: OpenRLHFRequest, options: ProtocolOptions
    ) -> OpenRLHFResponse:
        """OpenRLHF's ``/get_reward``: rewards, [0, 1] scores and numeric extra logs."""
        _check_openrlhf(request)
        # With several --remote_rm_url endpoints, OpenRLHF shards each request's samples
        # across them, so the others receive empty lists: they get empty answers.
        samples = [
            self._openrlhf_sample(query, prompt, i)
            for i, (query, prompt) in enumerate(zip(request.query, request.prompts, strict=True))
        ]
        rewards = await self.score(samples, options)
        return openrlhf_response(rewards, options.spec, [s.truncated for s in samples])

    def _openrlhf_sample(self, query: str, prompt: str, index: int) -> Sample:
        located = locate_response(query, prompt)
        if located is None:
            raise InvalidInput(
                f"query[{index}] does not contain prompts[{index}] (nor an end of it): each "
                "query must be the decoded prompt followed by the response",
                param=f"query[{index}]",
            )
        return Sample(
            self._clean_prompt(located.prompt_seen, truncated=located.truncated),
            located.response,
            truncated=located.truncated,
        )

    def _clean_prompt(self, text: str, *, truncated: bool = False) -> Prompt:
        """Chat-templated prompt text as the conversation it holds (see templates.py)."""
        if not self._settings.unwrap_templates:
            return text
        keep = self._settings.keep_system_prompt
        return unwrap_prompt(text, keep_system=keep, truncated=truncated).prompt

    async def slime(self, request: SlimeRequest, options: ProtocolOptions) -> SlimeResponse:
        """slime's ``remote_rm``: one sample, answered as a dict for ``--reward-key reward``."""
        prompt: Prompt = (
            self._clean_prompt(request.prompt)
            if isinstance(request.prompt, str)
            else [m.message() for m in request.prompt]
        )
        response = strip_end_markers(request.response)
        [reward] = await self.score([Sample(prompt, response)], options)
        return SlimeResponse(
            reward=reward.reward,
            score=reward.score,
            total=reward.total,
            status=reward.status,
            failed=reward.failed,
            channels=reward.channels,
            group_size=reward.group_size,
            spec_hash=reward.spec_hash,
        )

    async def score(
        self, samples: Sequence[Sample], options: ProtocolOptions
    ) -> list[SampleReward]:
        """Each sample's reward, its prompt's samples scored (or gathered) together."""
        by_prompt: dict[str, list[int]] = {}
        for i, sample in enumerate(samples):
            by_prompt.setdefault(_prompt_hash(sample.prompt), []).append(i)
        groups = list(by_prompt.values())
        tasks = [asyncio.ensure_future(self._score_prompt(samples, g, options)) for g in groups]
        try:
            answers = await asyncio.gather(*tasks)
        except BaseException:
            # One prompt failed: stop the others' waits, so none stays in a buffer.
            for task in tasks:
                task.cancel()
            raise
        out: dict[int, SampleReward] = {}
        for indexes, answer in zip(groups, answers, strict=True):
            out.update(zip(indexes, answer, strict=True))
        rewards = [out[i] for i in range(len(samples))]
        _apply_policy(rewards, options.on_failure)
        return rewards

    async def aclose(self) -> None:
        """Release every waiting request (at shutdown)."""
        await self._buffer.aclose()

    async def _score_prompt(
        self, samples: Sequence[Sample], indexes: list[int], options: ProtocolOptions
    ) -> list[SampleReward]:
        prompt = samples[indexes[0]].prompt
        key = GroupKey(
            prompt_hash=_prompt_hash(prompt),
            spec_hash=options.spec.hash,
            run_id=options.run_id,
            step=options.step,
            size=options.group_size,
            prompt=prompt,
            spec=options.spec,
        )
        responses = [samples[i].response for i in indexes]
        if not options.buffered:
            return await self._score_group(key, responses)
        return await self._buffer.submit(
            key,
            responses,
            size=options.group_size,
            wait_s=options.wait_s,
            settle=options.settle,
        )

    async def _score_group(self, key: GroupKey, responses: list[str]) -> list[SampleReward]:
        if len(responses) < 2 and key.spec.group_channels:
            return await self._score_alone(key, responses)
        if not key.spec.group_channels:
            response = await self._score(key, key.spec, responses)
            return settle_group(key.spec, response.results)
        with self._in_flight.scoring(key):
            response = await self._score(key, key.spec, responses)
            settled = settle_group(key.spec, response.results)
            self._recent.remember(key, settled)
        return settled

    async def _score_alone(self, key: GroupKey, responses: list[str]) -> list[SampleReward]:
        """A sample that reached its deadline alone (a straggler of a group already scored,
        or a prompt sampled once): its per-sample channels score it; each group channel takes
        its group's mean (a straggler) or its midpoint, so that channel adds nothing to its
        advantage under the trainer's group normalization. Flagged ``group_too_small``. When
        its group is still being scored, it waits for the group's means (issue 22)."""
        await self._in_flight.wait(key)
        recent = self._recent.get(key)
        log.info(
            "a lone sample reached its deadline (%s); its group channels (%s) take %s",
            "its group was scored before it" if recent else "no group seen",
            ", ".join(key.spec.group_channels),
            "the group's means" if recent else "their midpoints",
        )
        pointwise = {n: c for n, c in key.spec.channels.items() if not c.needs_group}
        if not pointwise:
            return unscored_group(key.spec, len(responses), GROUP_TOO_SMALL, fills=recent)
        own = ResolvedSpec(channels=pointwise, advantage="none")
        response = await self._score(key, own, responses)
        return lone_samples(key.spec, response.results, GROUP_TOO_SMALL, fills=recent)

    async def _score(
        self, key: GroupKey, spec: ResolvedSpec, responses: list[str]
    ) -> RewardsGroupResponse:
        """The rewards service's scoring of one group; the spec goes as resolved, so it is
        not checked a second time."""
        group = RewardsGroupRequest(
            prompt=key.prompt,
            completions=[CompletionItem(text=text) for text in responses],
            spec=spec.as_dict(),
            run_id=key.run_id,
            step=key.step,
        )
        return await self._rewards.group(group, resolved=spec)


def openrlhf_response(
    rewards: Sequence[SampleReward], spec: ResolvedSpec, truncated: Sequence[bool] | None = None
) -> OpenRLHFResponse:
    """OpenRLHF's answer; ``extra_logs`` hold numbers only (OpenRLHF averages them for logs)."""
    cut = list(truncated) if truncated is not None else [False] * len(rewards)
    extra_logs = {
        "plaudit_failed": [1.0 if r.failed else 0.0 for r in rewards],
        "plaudit_group_size": [float(r.group_size) for r in rewards],
        "plaudit_truncated": [1.0 if t else 0.0 for t in cut],
    }
    for name in sorted(spec.channels):
        extra_logs[f"plaudit_{name}"] = [r.channels[name] for r in rewards]
    return OpenRLHFResponse(
        rewards=[r.reward for r in rewards],
        scores=[r.score for r in rewards],
        extra_logs=extra_logs,
        statuses=[r.status for r in rewards],
        truncated=cut,
        spec_hash=spec.hash,
    )


def _apply_policy(rewards: Sequence[SampleReward], policy: FailurePolicy) -> None:
    failed = [r for r in rewards if r.failed]
    if policy == "error" and failed:
        raise BackendUnavailable(
            f"{len(failed)} of {len(rewards)} samples could not be scored "
            f"(status {failed[0].status}); retry, or use on_failure=neutral",
            retry_after=RETRY_AFTER_S,
        )


def protocol_spec(raw: Any, rewards: RewardsService) -> ResolvedSpec:
    """A reward spec for the trainer protocols: any valid spec whose advantage is none.

    The trainers normalize rewards themselves (GRPO, RLOO, group_norm), so Plaudit must not.
    """
    spec = rewards.resolve(raw)
    if spec.advantage != "none":
        raise InvalidInput(
            "the trainer protocols answer rewards and the trainer computes advantages: "
            "leave the spec's advantage out (or set it to none)",
            param="spec.advantage",
        )
    return spec


def _parse_spec(raw: str) -> Any:
    try:
        spec = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"spec: not valid JSON ({exc.msg})", param="spec") from None
    if find_surrogates(spec, limit=1):
        raise InvalidInput("spec: holds a lone UTF-16 surrogate (not valid Unicode)", param="spec")
    return spec


def _check_openrlhf(request: OpenRLHFRequest) -> None:
    n = len(request.query)
    for name in ("prompts", "labels"):
        values = getattr(request, name)
        if values is not None and len(values) != n:
            raise InvalidInput(f"{name} needs one entry per query ({n})", param=name)


def _group_id(key: GroupKey) -> str:
    """The name of ``key``'s group on Redis: equal keys, equal names, in every process."""
    return content_hash([key.prompt_hash, key.spec_hash, key.run_id, key.step, key.size])


def _prompt_hash(prompt: Prompt) -> str:
    if isinstance(prompt, str):
        return content_hash(prompt)
    return content_hash([m.model_dump() for m in prompt])
