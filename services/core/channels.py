"""Reward channels: what each service contributes to composite rewards (no FastAPI, no I/O).

A channel is declared by its spec model (its options, its value range, whether it needs the
whole group) and run by a function of the service that owns it. Services add their channels
from inside their own folder (``services/judge/channels.py``); the rewards service finds them
in the :class:`ChannelRegistry` of the process::

    registry = ChannelRegistry()
    registry.add(Channel("diversity", DiversitySpec, run_diversity, "group diversity"))
    registry.get("diversity").spec.needs_group  # True
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, Self

from pydantic import Field

from plaudit_wire.schemas import Completion, Prompt, StrictModel


class ChannelOptionError(ValueError):
    """A channel option that validates alone but cannot be used (e.g. an unknown template)."""

    def __init__(self, option: str, message: str) -> None:
        super().__init__(message)
        self.option = option
        self.message = message


class ChannelSpec(StrictModel):
    """Every channel takes a weight: total = sum(weight * value).

    Subclasses say whether they compare a group's completions (``needs_group``) and the range
    of their values (``value_range``), which trainer protocols use to map a value onto [0, 1].
    """

    needs_group: ClassVar[bool] = False

    weight: float = Field(default=1.0, ge=0, allow_inf_nan=False)

    def value_range(self) -> tuple[float, float] | None:
        """``(low, high)`` of the channel's values; None when unbounded (mapped by a logistic)."""
        return (0.0, 1.0)

    def ordinal_levels(self) -> int | None:
        """K when the channel grades on levels 1..K (its outcome's ``levels`` are then each
        completion's most likely level, which ODRPO's advantages use); None otherwise."""
        return None

    def resolved(self) -> Self:
        """This spec with server-side defaults pinned (templates to a version); may raise
        :class:`ChannelOptionError`."""
        return self


class GroupInput(Protocol):
    """What a channel sees of one rollout group: the rewards request itself, read in place
    (issue 20: no copy between the wire and the channels). ``columns``: the dataset columns of
    the group's prompt that the trainer sent along (e.g. ``{"rubric_id": "rb_...@2"}``);
    ``run_id`` and ``step``: the request's, for channels that remember runs (adaptive rubrics)."""

    @property
    def prompt(self) -> Prompt: ...

    @property
    def completions(self) -> Sequence[Completion]: ...

    @property
    def finish_reasons(self) -> Sequence[str | None] | None: ...

    @property
    def token_counts(self) -> Sequence[int] | None: ...

    @property
    def columns(self) -> Mapping[str, Any] | None: ...

    @property
    def run_id(self) -> str | None: ...

    @property
    def step(self) -> int | None: ...


@dataclass
class ChannelOutcome:
    """One channel's answer for a whole group, one entry per completion.

    ``levels`` carries each completion's most likely level when the spec declares
    ``ordinal_levels`` (judge_scale, for ODRPO); other channels leave it None.
    """

    values: list[float | None]
    statuses: list[str]
    meta: dict[str, Any]
    details: list[dict[str, Any]]
    errors: list[str | None] = field(default_factory=list)
    levels: list[int | None] | None = None


ChannelRun = Callable[[Any, GroupInput], Awaitable[ChannelOutcome]]


@dataclass(frozen=True)
class Channel:
    """A named channel: its spec model and how to run it for one group."""

    name: str
    spec: type[ChannelSpec]
    run: ChannelRun
    description: str = ""

    def describe(self) -> dict[str, Any]:
        """What ``/v1/rewards/validate`` and ``/v1/rewards/channels`` say of it."""
        default = self.spec().value_range() if _has_defaults(self.spec) else None
        return {
            "needs_group": self.spec.needs_group,
            "options": sorted(self.spec.model_fields),
            "default_range": list(default) if default is not None else None,
            "description": self.description,
        }


def _has_defaults(spec: type[ChannelSpec]) -> bool:
    return all(not f.is_required() for f in spec.model_fields.values())


class ChannelRegistry:
    """Every channel this process serves, by name."""

    def __init__(self) -> None:
        self._channels: dict[str, Channel] = {}

    def add(self, channel: Channel) -> None:
        if channel.name in self._channels:
            raise ValueError(f"channel {channel.name!r} is registered twice")
        self._channels[channel.name] = channel

    def get(self, name: str) -> Channel | None:
        return self._channels.get(name)

    def names(self) -> list[str]:
        return sorted(self._channels)

    def __iter__(self) -> Iterator[Channel]:
        return iter(self._channels[name] for name in self.names())

    def __len__(self) -> int:
        return len(self._channels)
