"""Generate mode's reply: one strict JSON object with a verdict per criterion (pure).

The judge is asked for ``{"verdicts": [{"id": "c1", "met": true, "reason": "..."}, ...]}``.
A reply that is not exactly such an object (a code fence around it is tolerated) is
``invalid_output`` for the whole completion; a valid object that leaves out a criterion makes
that criterion ``invalid_output``. Nothing is guessed from prose.

    >>> v = parse_verdicts('{"verdicts": [{"id": "c1", "met": true, "reason": "ok"}]}', ["c1"])
    >>> v.error is None and v.verdicts["c1"].met
    True
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

#: Tokens of JSON syntax per verdict (``{"id": "c1", "met": true, "reason": ""}``) and around
#: the list; a reason gets ``REASON_CHARS_PER_TOKEN`` characters per token left (SmolLM2 averages
#: about 4 characters a token on English, 3 leaves room), as services/judge/structured.py does.
JSON_TOKENS_PER_VERDICT = 20
JSON_OVERHEAD_TOKENS = 8
REASON_CHARS_PER_TOKEN = 3


def verdicts_schema(ids: Sequence[str], max_new_tokens: int) -> dict[str, Any]:
    """The reply's JSON schema: exactly one verdict per criterion id, with reasons bounded so
    that the whole object fits ``max_new_tokens`` (issue 19: with no schema the 135M judge's
    replies never parsed). Backends enforce it while decoding (local: xgrammar; OpenAI path:
    ``response_format``).

    >>> verdicts_schema(["c1", "c2"], 128)["properties"]["verdicts"]["maxItems"]
    2
    """
    left = max_new_tokens - JSON_OVERHEAD_TOKENS - JSON_TOKENS_PER_VERDICT * len(ids)
    reason_chars = max(0, left // max(1, len(ids)) * REASON_CHARS_PER_TOKEN)
    verdict = {
        "type": "object",
        "properties": {
            "id": {"type": "string", "enum": list(ids)},
            "met": {"type": "boolean"},
            "reason": {"type": "string", "maxLength": reason_chars},
        },
        "required": ["id", "met", "reason"],
        "additionalProperties": False,
    }
    verdicts = {"type": "array", "items": verdict, "minItems": len(ids), "maxItems": len(ids)}
    return {
        "type": "object",
        "properties": {"verdicts": verdicts},
        "required": ["verdicts"],
        "additionalProperties": False,
    }


_FENCE = re.compile(r"^```(?:json)?\s*\n(?P<body>.*)\n```$", re.DOTALL)


class _Verdict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    id: str
    met: bool
    reason: str = Field(default="", max_length=2000)


class _Reply(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    verdicts: list[_Verdict]


@dataclass(frozen=True)
class Verdict:
    met: bool
    reason: str


@dataclass(frozen=True)
class ParsedVerdicts:
    """The verdicts found by criterion id, or ``error`` when the reply is unusable."""

    verdicts: dict[str, Verdict] = field(default_factory=dict)
    error: str | None = None


def parse_verdicts(reply: str, ids: Sequence[str]) -> ParsedVerdicts:
    """Read the judge's JSON reply against the rubric's criterion ids."""
    text = reply.strip()
    fenced = _FENCE.match(text)
    if fenced is not None:
        text = fenced["body"].strip()
    try:
        parsed = _Reply.model_validate(json.loads(text))
    except json.JSONDecodeError as exc:
        return ParsedVerdicts(error=f"the reply is not JSON ({exc.msg})")
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        return ParsedVerdicts(error=f"the reply does not fit the schema: {where}: {first['msg']}")
    known = set(ids)
    found: dict[str, Verdict] = {}
    for item in parsed.verdicts:
        if item.id not in known:
            return ParsedVerdicts(error=f"the reply names an unknown criterion {item.id!r}")
        if item.id in found:
            return ParsedVerdicts(error=f"the reply judges {item.id} twice")
        found[item.id] = Verdict(met=item.met, reason=item.reason)
    return ParsedVerdicts(verdicts=found)
