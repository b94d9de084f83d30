"""Names, kinds and references of stored artifacts: ``boil`` (the current version), ``boil@3``.

Every consumer (reward specs, rubrics, reward models, simulator calibrations) parses references
here, so ``name@x`` is the same clear 422 everywhere::

    >>> parse_ref("boil@3")
    ArtifactRef(name='boil', version=3)
    >>> str(parse_ref("boil"))
    'boil'
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated

from pydantic import AfterValidator, Field

from services.core.errors import InvalidInput

#: Letters, digits, ``.``, ``_`` and ``-``; starts with a letter or digit; at most 128 long.
#: No ``@`` (the version separator) and no ``/`` (names sit in URL paths and folder names).
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
KIND_PATTERN = re.compile(r"[a-z][a-z0-9_]{0,63}")
_VERSION_PATTERN = re.compile(r"[1-9][0-9]{0,8}")
MAX_REF_LENGTH = 128 + 1 + 9
#: Between a tenant's owner id and a name in a stored name (``key_0123abcd~helpful``): a
#: tenant's own artifacts live in its own namespace (issue 23), so the separator is a
#: character that public names cannot hold.
OWNER_SEPARATOR = "~"
_OWNER_PATTERN = re.compile(r"[A-Za-z0-9_]{1,40}")
#: The same rules as JSON-schema patterns, for the OpenAPI schema (issue 23, finding 10: the
#: schema said "any string" where the server took only these). ``(@N)?``: a version.
NAME_REGEX = f"^{NAME_PATTERN.pattern}$"
REF_REGEX = f"^{NAME_PATTERN.pattern}(@{_VERSION_PATTERN.pattern})?$"
#: A reference an admin may prefix with a tenant's owner id (``key_0123abcd~helpful@2``).
OWNED_REF_REGEX = f"^({_OWNER_PATTERN.pattern}{OWNER_SEPARATOR})?{REF_REGEX[1:]}"


@dataclass(frozen=True)
class ArtifactRef:
    """A parsed reference: ``version`` None means the artifact's current version."""

    name: str
    version: int | None = None

    def __str__(self) -> str:
        return self.name if self.version is None else f"{self.name}@{self.version}"


def name_problem(name: str) -> str | None:
    """Why ``name`` is not a valid artifact name, or None when it is."""
    if NAME_PATTERN.fullmatch(name):
        return None
    return (
        f"{name[:140]!r} is not an artifact name: use 1 to 128 letters, digits, '.', '_' or '-', "
        "starting with a letter or digit"
    )


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
    if owner is not None and not _OWNER_PATTERN.fullmatch(owner):
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


def ref_problem(text: str) -> str | None:
    """Why ``text`` is not a reference (``name`` or ``name@N``, N >= 1), or None."""
    name, sep, version = text.partition("@")
    problem = name_problem(name)
    if problem is not None:
        return problem
    if sep and not _VERSION_PATTERN.fullmatch(version):
        return (
            f"bad version {version[:20]!r} in {text[:140]!r}: write 'name' for the current "
            "version or 'name@N' with N a positive integer"
        )
    return None


def parse_ref(text: str, param: str | None = None) -> ArtifactRef:
    """``"boil"`` -> ArtifactRef("boil"), ``"boil@3"`` -> ArtifactRef("boil", 3).

    Raises InvalidInput (422, with ``param``) for anything else, such as ``boil@x``.
    """
    problem = ref_problem(text)
    if problem is not None:
        raise InvalidInput(problem, param=param)
    name, sep, version = text.partition("@")
    return ArtifactRef(name, int(version) if sep else None)


def _validate_ref(text: str) -> str:
    problem = ref_problem(text)
    if problem is not None:
        raise ValueError(problem)
    return text


def _validate_name(text: str) -> str:
    problem = name_problem(text)
    if problem is not None:
        raise ValueError(problem)
    return text


#: A request field naming an artifact (``helpful``): the rule is in the schema, and the server
#: checks it with its own message (which says what a name may hold).
ArtifactName = Annotated[
    str,
    Field(min_length=1, max_length=128, json_schema_extra={"pattern": NAME_REGEX}),
    AfterValidator(_validate_name),
]
#: A request field holding a reference (``helpful`` or ``helpful@3``), checked at the edge
#: (pydantic -> 422 with its location).
ArtifactRefStr = Annotated[
    str,
    Field(min_length=1, max_length=MAX_REF_LENGTH, json_schema_extra={"pattern": REF_REGEX}),
    AfterValidator(_validate_ref),
]
