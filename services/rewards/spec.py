"""Reward specs: check one, fill its defaults, and hash it (no I/O).

A spec names weighted channels and an optional advantage estimator::

    {"channels": {"diversity": {"weight": 0.5}, "judge_scale": {"weight": 1.0, "k": 10}},
     "advantage": "none"}

The hash is taken over the *resolved* spec (defaults filled, templates pinned to a version),
so two specs that score the same way share one hash whatever their key order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, get_args

from pydantic import ValidationError

from plaudit_wire.rewards import AdvantageName, SpecError
from services.core.channels import ChannelOptionError, ChannelRegistry, ChannelSpec
from services.core.db.records import content_hash
from services.core.errors import InvalidInput

SPEC_KEYS = ("channels", "advantage")


@dataclass(frozen=True)
class ResolvedSpec:
    """A checked spec with every default filled; ``hash`` identifies how it scores."""

    channels: Mapping[str, ChannelSpec]
    advantage: AdvantageName

    def as_dict(self) -> dict[str, Any]:
        """Example: ``{"channels": {"diversity": {"weight": 1.0, ...}}, "advantage": "none"}``"""
        return {
            "channels": {name: self.channels[name].model_dump() for name in sorted(self.channels)},
            "advantage": self.advantage,
        }

    @property
    def ordinal_channel(self) -> str | None:
        """The channel whose levels ODRPO ranks (the first that grades on levels 1..K)."""
        graded = [name for name in sorted(self.channels) if self.channels[name].ordinal_levels()]
        return graded[0] if graded else None

    @property
    def group_channels(self) -> list[str]:
        """The channels that compare a group's completions (a group must be gathered)."""
        return sorted(name for name, c in self.channels.items() if c.needs_group)

    @property
    def hash(self) -> str:
        return spec_hash(self)


def spec_hash(spec: ResolvedSpec) -> str:
    """sha256 of the resolved spec with sorted keys: ``spec_hash(resolve_spec(raw))``."""
    return content_hash(spec.as_dict())


def check_spec(raw: Any, registry: ChannelRegistry) -> tuple[ResolvedSpec | None, list[SpecError]]:
    """The resolved spec, or every problem found, each naming its field.

    >>> spec, errors = check_spec({"channels": {"foo": {}}}, ChannelRegistry())
    >>> spec is None and errors[0].param
    'spec.channels.foo'
    """
    if not isinstance(raw, dict):
        return None, [SpecError(param="spec", message="the spec must be an object")]
    errors = [
        SpecError(
            param=f"spec.{key}",
            message=f"unknown field; a spec takes {' and '.join(SPEC_KEYS)}",
        )
        for key in raw
        if key not in SPEC_KEYS
    ]
    advantage = _advantage(raw.get("advantage", "none"), errors)
    channels = _channels(raw.get("channels"), registry, errors)
    if advantage == "odrpo" and channels is not None and not _graded(channels):
        errors.append(
            SpecError(
                param="spec.advantage",
                message="odrpo needs a channel that grades on levels 1..K, such as judge_scale "
                "(its grades are the ordinal levels)",
            )
        )
    if errors or advantage is None or channels is None:
        return None, errors
    return ResolvedSpec(channels=channels, advantage=advantage), []


def resolve_spec(raw: Any, registry: ChannelRegistry) -> ResolvedSpec:
    """Like :func:`check_spec`, but raises ``InvalidInput`` (a 422) naming the first problem.

    Example: ``resolve_spec({"channels": {"judge_scale": {"k": 5}}}, registry)`` fills the
    weight (1.0) and pins the template (``scale@2``).
    """
    spec, errors = check_spec(raw, registry)
    if spec is None:
        first = errors[0]
        more = f" (and {len(errors) - 1} more problem(s))" if len(errors) > 1 else ""
        raise InvalidInput(f"{first.param}: {first.message}{more}", param=first.param)
    return spec


def _advantage(value: Any, errors: list[SpecError]) -> AdvantageName | None:
    allowed: tuple[AdvantageName, ...] = get_args(AdvantageName)
    for name in allowed:
        if value == name:
            return name
    errors.append(SpecError(param="spec.advantage", message=f"must be one of {', '.join(allowed)}"))
    return None


def _channels(
    raw: Any, registry: ChannelRegistry, errors: list[SpecError]
) -> dict[str, ChannelSpec] | None:
    if raw is None:
        errors.append(SpecError(param="spec.channels", message="field required"))
        return None
    if not isinstance(raw, dict) or not raw:
        errors.append(
            SpecError(param="spec.channels", message="must be a non-empty object of channels")
        )
        return None
    resolved: dict[str, ChannelSpec] = {}
    for name, options in raw.items():
        channel = _channel(str(name), options, registry, errors)
        if channel is not None:
            resolved[str(name)] = channel
    return resolved if len(resolved) == len(raw) else None


def _channel(
    name: str, options: Any, registry: ChannelRegistry, errors: list[SpecError]
) -> ChannelSpec | None:
    param = f"spec.channels.{name}"
    found = registry.get(name)
    if found is None:
        errors.append(SpecError(param=param, message=_unknown_channel(name, registry)))
        return None
    model = found.spec
    if not isinstance(options, dict):
        errors.append(SpecError(param=param, message='must be an object, e.g. {"weight": 1.0}'))
        return None
    try:
        channel = model.model_validate(options)
    except ValidationError as exc:
        errors.extend(_option_errors(param, model, exc))
        return None
    try:
        return channel.resolved()
    except ChannelOptionError as exc:
        errors.append(SpecError(param=f"{param}.{exc.option}", message=exc.message))
        return None


def _graded(channels: Mapping[str, ChannelSpec]) -> bool:
    return any(spec.ordinal_levels() for spec in channels.values())


def _unknown_channel(name: str, registry: ChannelRegistry) -> str:
    return f"unknown channel {name!r}; available: {', '.join(registry.names())}"


def _option_errors(param: str, model: type[ChannelSpec], exc: ValidationError) -> list[SpecError]:
    out = []
    for error in exc.errors():
        where = _loc(param, error.get("loc", ()))
        if error.get("type") == "extra_forbidden":
            message = f"unknown option; this channel takes {', '.join(model.model_fields)}"
        elif error.get("type") == "finite_number":
            message = "must be a finite number"
        else:
            message = str(error.get("msg", "invalid value"))
        out.append(SpecError(param=where, message=message))
    return out


def _loc(prefix: str, loc: Sequence[int | str]) -> str:
    out = prefix
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out
