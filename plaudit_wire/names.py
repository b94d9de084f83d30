"""Ids and artifact names as both sides of the API write them: the rules, their JSON-schema
patterns and the request field types (``ArtifactName``, ``ArtifactRefStr``).

>>> ref_problem("boil@3") is None, ref_problem("boil@x") is None
(True, False)
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, Field

#: The rule of ids in paths, queries and headers (also in the OpenAPI schema).
ID_PATTERN = r"^[^\x00-\x1f\x7f]+$"
#: Text filters in query strings: anything but NUL, which the database cannot compare.
NO_NUL_PATTERN = r"^[^\x00]*$"

#: Letters, digits, ``.``, ``_`` and ``-``; starts with a letter or digit; at most 128 long.
#: No ``@`` (the version separator) and no ``/`` (names sit in URL paths and folder names).
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
KIND_PATTERN = re.compile(r"[a-z][a-z0-9_]{0,63}")
VERSION_PATTERN = re.compile(r"[1-9][0-9]{0,8}")
MAX_REF_LENGTH = 128 + 1 + 9
#: Between a tenant's owner id and a name in a stored name (``key_0123abcd~helpful``): a
#: tenant's own artifacts live in its own namespace (issue 23), so the separator is a
#: character that public names cannot hold.
OWNER_SEPARATOR = "~"
OWNER_PATTERN = re.compile(r"[A-Za-z0-9_]{1,40}")
#: The same rules as JSON-schema patterns, for the OpenAPI schema (issue 23, finding 10: the
#: schema said "any string" where the server took only these). ``(@N)?``: a version.
NAME_REGEX = f"^{NAME_PATTERN.pattern}$"
REF_REGEX = f"^{NAME_PATTERN.pattern}(@{VERSION_PATTERN.pattern})?$"
#: A reference an admin may prefix with a tenant's owner id (``key_0123abcd~helpful@2``).
OWNED_REF_REGEX = f"^({OWNER_PATTERN.pattern}{OWNER_SEPARATOR})?{REF_REGEX[1:]}"


def name_problem(name: str) -> str | None:
    """Why ``name`` is not a valid artifact name, or None when it is."""
    if NAME_PATTERN.fullmatch(name):
        return None
    return (
        f"{name[:140]!r} is not an artifact name: use 1 to 128 letters, digits, '.', '_' or '-', "
        "starting with a letter or digit"
    )


def ref_problem(text: str) -> str | None:
    """Why ``text`` is not a reference (``name`` or ``name@N``, N >= 1), or None."""
    name, sep, version = text.partition("@")
    problem = name_problem(name)
    if problem is not None:
        return problem
    if sep and not VERSION_PATTERN.fullmatch(version):
        return (
            f"bad version {version[:20]!r} in {text[:140]!r}: write 'name' for the current "
            "version or 'name@N' with N a positive integer"
        )
    return None


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
