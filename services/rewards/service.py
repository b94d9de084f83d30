"""Composite group rewards: one request, every channel of a reward spec, one weighted total.

The channels of a spec run concurrently (``asyncio.gather``); each asks an existing service
(judge, diversity) about the whole group in one call, so their backends batch as usual.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from plaudit_wire.rewards import (
    RewardsGroupRequest,
    RewardsGroupResponse,
    ValidateRequest,
    ValidateResponse,
)
from plaudit_wire.schemas import ScoredGroupPage, completion_ids
from services.core.channels import ChannelOutcome, ChannelRegistry, ChannelSpec
from services.core.db.records import content_hash
from services.core.errors import BackendUnavailable, InvalidInput
from services.core.web.access import note
from services.rewards import aggregate
from services.rewards.groups import RewardGroups
from services.rewards.named import NamedSpecs, SpecInUse
from services.rewards.run_metrics import RunMetrics
from services.rewards.spec import ResolvedSpec, check_spec, resolve_spec

log = logging.getLogger(__name__)


class RewardsService:
    """Scores a rollout group with a reward spec and keeps the result for the run's audit.

    Example::

        service = RewardsService(channels, RewardGroups(sessions))
        response = await service.group(RewardsGroupRequest.model_validate(body))
        response.results[0].total  # None when one of its channels failed
    """

    def __init__(
        self,
        channels: ChannelRegistry,
        groups: RewardGroups | None = None,
        specs: NamedSpecs | None = None,
        *,
        store_texts: bool = True,
        run_metrics: RunMetrics | None = None,
    ) -> None:
        self._channels_registry = channels
        self._groups = groups
        self._specs = specs
        self._store_texts = store_texts
        self._run_metrics = run_metrics

    @property
    def specs(self) -> NamedSpecs:
        if self._specs is None:
            raise BackendUnavailable("named specs need the artifact store", retry_after=5)
        return self._specs

    @property
    def channels(self) -> ChannelRegistry:
        return self._channels_registry

    def resolve(self, raw: object) -> ResolvedSpec:
        """The checked spec (a 422 naming the first problem)."""
        return resolve_spec(raw, self._channels_registry)

    def validate(self, request: ValidateRequest) -> ValidateResponse:
        """A dry run: the resolved spec, its hash and its group channels, or every problem."""
        spec, errors = check_spec(request.spec, self._channels_registry)
        if spec is None:
            return ValidateResponse(valid=False, errors=errors)
        return ValidateResponse(
            valid=True,
            spec=spec.as_dict(),
            spec_hash=spec.hash,
            group_channels=spec.group_channels,
            channel_ranges={
                name: (list(bounds) if (bounds := channel.value_range()) is not None else None)
                for name, channel in spec.channels.items()
            },
        )

    def describe_channels(self) -> dict[str, dict[str, object]]:
        """Every channel this server scores with: options, range, whether it needs a group."""
        return {channel.name: channel.describe() for channel in self._channels_registry}

    async def group(
        self, request: RewardsGroupRequest, *, resolved: ResolvedSpec | None = None
    ) -> RewardsGroupResponse:
        """Per-completion totals (and advantages when the spec asks), stored when run_id is set.

        ``resolved``: the spec of ``request`` already checked by a caller in this process (the
        protocols service resolves a run's spec once, not once per group), used as it is."""
        use = SpecInUse(resolved) if resolved is not None else await self._spec_in_use(request.spec)
        spec = use.spec
        outcomes = await self._channels(spec, request)
        rewards = aggregate.completion_rewards(completion_ids(request.completions), spec, outcomes)
        for reward, advantage in zip(
            rewards, aggregate.advantages(spec, rewards, outcomes), strict=True
        ):
            reward.advantage = advantage
        response = RewardsGroupResponse(
            kind="rewards" if spec.advantage == "none" else "advantages",
            id=request.id,
            spec_hash=spec.hash,
            spec_name=use.name,
            spec_version=use.version,
            advantage=spec.advantage,
            results=rewards,
            stats=aggregate.group_stats(rewards),
        )
        await self._store(request, use, response)
        note(
            run=request.run_id,
            step=request.step,
            group=len(request.completions),
            channels=",".join(sorted(spec.channels)),
            spec=use.name,
        )
        if request.run_id is not None and self._run_metrics is not None:
            self._run_metrics.observe(
                request.run_id, response, [c.text for c in request.completions]
            )
        return response

    async def check_spec(self, raw: object) -> None:
        """Raise the 422 (or 404 for an unknown saved name) that scoring with ``raw`` would."""
        await self._spec_in_use(raw)

    async def _spec_in_use(self, raw: object) -> SpecInUse:
        """An inline spec, or a saved one named ``name`` / ``name@N``."""
        if isinstance(raw, str):
            return await self.specs.in_use(raw)
        return SpecInUse(self.resolve(raw))

    async def list_groups(
        self, run_id: str, *, step: int | None = None, limit: int = 100, offset: int = 0
    ) -> ScoredGroupPage:
        """The run's stored reward groups, in the order they were scored."""
        if self._groups is None:
            return ScoredGroupPage(run_id=run_id, groups=[], next_offset=None)
        return await self._groups.page(run_id, step=step, limit=limit, offset=offset)

    async def _channels(
        self, spec: ResolvedSpec, request: RewardsGroupRequest
    ) -> dict[str, ChannelOutcome]:
        names = sorted(spec.channels)
        answers = await asyncio.gather(
            *(self._run(name, spec.channels[name], request) for name in names),
            return_exceptions=True,
        )
        # Every channel has finished by now, so raising leaves nothing running behind us.
        _raise_first(answers)
        return {
            name: answer
            for name, answer in zip(names, answers, strict=True)
            if isinstance(answer, ChannelOutcome)
        }

    async def _run(
        self, name: str, spec: ChannelSpec, request: RewardsGroupRequest
    ) -> ChannelOutcome:
        """One channel's outcome; a service's complaint about an option names the spec field."""
        channel = self._channels_registry.get(name)
        if channel is None:  # resolve_spec already refused it; kept for direct callers
            raise InvalidInput(f"unknown channel {name!r}", param=f"spec.channels.{name}")
        try:
            return await channel.run(spec, request)
        except InvalidInput as exc:
            if exc.param in type(spec).model_fields:
                raise InvalidInput(exc.message, param=f"spec.channels.{name}.{exc.param}") from None
            raise

    async def _store(
        self, request: RewardsGroupRequest, use: SpecInUse, response: RewardsGroupResponse
    ) -> None:
        if request.run_id is None or self._groups is None:
            return
        payload = request.model_dump(exclude={"run_id", "step", "spec"})
        payload["spec"] = use.spec.as_dict()
        # What was scored, without the spec (the result names it): enough to audit or rescore.
        inputs = request.model_dump(mode="json", exclude={"run_id", "step", "spec", "id"})
        await self._groups.add(
            request.run_id,
            request.step,
            request.id,
            content_hash(payload),
            response.wire(),
            spec_name=use.name,
            spec_version=use.version,
            inputs=inputs if self._store_texts else None,
        )
        log.debug("stored rewards group for run %s step %s", request.run_id, request.step)


def _raise_first(answers: Sequence[ChannelOutcome | BaseException]) -> None:
    for answer in answers:
        if isinstance(answer, BaseException):
            raise answer
