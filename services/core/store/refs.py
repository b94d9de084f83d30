"""Names, kinds and references of stored artifacts: ``boil`` (the current version), ``boil@3``.

Every consumer (reward specs, rubrics, reward models, simulator calibrations) parses references
here, so ``name@x`` is the same clear 422 everywhere::

    >>> parse_ref("boil@3")
    ArtifactRef(name='boil', version=3)
    >>> str(parse_ref("boil"))
    'boil'
"""

from __future__ import annotations

from dataclasses import dataclass

from plaudit_wire.names import (
    KIND_PATTERN,
    OWNER_PATTERN,
    OWNER_SEPARATOR,
    name_problem,
    ref_problem,
)
from services.core.errors import InvalidInput


@dataclass(frozen=True)
class ArtifactRef:
    """A parsed reference: ``version`` None means the artifact's current version."""

    name: str
    version: int | None = None

    def __str__(self) -> str:
        return self.name if self.version is None else f"{self.name}@{self.version}"


def check_name(name: str, param: str | None = "name") -> str:
    """``name`` when valid; InvalidInput (422) otherwise."""
    problem = name_problem(name)
    if problem is not None:
        raise InvalidInput(problem, param=param)
    return name


def owned_name(owner: str | None, name: str) -> str:
    """The stored name of ``owner``'s artifact ``name`` (``name`` itself when shared)."""
    return name if owner is None else f"{owner}{OWNER_SEPARATOR}{name}"


def split_owned(stored: str) -> tuple[str | None, str]:
    """``"key_1~helpful"`` -> ``("key_1", "helpful")``; a shared name has owner None."""
    owner, sep, name = stored.partition(OWNER_SEPARATOR)
    return (owner, name) if sep else (None, stored)


def check_stored_name(stored: str, param: str | None = "name") -> str:
    """A public name, or an owner id, the separator and a public name; else InvalidInput."""
    owner, name = split_owned(stored)
    if owner is not None and not OWNER_PATTERN.fullmatch(owner):
        raise InvalidInput(f"{owner[:60]!r} is not an owner id", param=param)
    check_name(name, param)
    return stored


def check_kind(kind: str, param: str | None = "kind") -> str:
    """``kind`` (``reward_spec``, ``rubric``, ...) when valid; InvalidInput (422) otherwise."""
    if not KIND_PATTERN.fullmatch(kind):
        raise InvalidInput(
            f"{kind[:80]!r} is not an artifact kind: lowercase letters, digits and '_'", param=param
        )
    return kind


def parse_ref(text: str, param: str | None = None) -> ArtifactRef:
    """``"boil"`` -> ArtifactRef("boil"), ``"boil@3"`` -> ArtifactRef("boil", 3).

    Raises InvalidInput (422, with ``param``) for anything else, such as ``boil@x``.
    """
    problem = ref_problem(text)
    if problem is not None:
        raise InvalidInput(problem, param=param)
    name, sep, version = text.partition("@")
    return ArtifactRef(name, int(version) if sep else None)
