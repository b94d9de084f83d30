"""The two KARMA variants as text: what the model reads for one reply.

``context_only`` reads the conversation (title, post, parent comment) and the reply.
``with_metadata`` also reads a header of metadata fields (subreddit, depth, the reply's age
since the thread's first comment, and any field a user's data brings), as in the KARMA paper.

Order caveat: in the shared pairs the preferred reply is always the later one (the SHP rule), so
a field that reveals posting order (:data:`~services.karma.data.ORDER_FIELDS`) would make the
pair test trivial. ``order_blind=True`` drops those fields; pair training and pair evaluation
always use it. Their value is measured with within-thread rank correlation over all replies.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from plaudit_wire.karma import Variant
from services.karma.data import ORDER_FIELDS, Reply

VARIANTS: tuple[Variant, ...] = ("context_only", "with_metadata")
#: Header fields in this order first, then any other field alphabetically.
FIELD_ORDER = ("subreddit", "depth", "age")


@dataclass(frozen=True, slots=True)
class KarmaInput:
    """A context, one reply, and optional metadata fields (text values).

    ``parts`` are the context's turns, oldest first (a post's title and text and the parent
    comment; a chat's messages); the frozen-encoder model embeds the first and the last.
    Empty: the whole ``context`` is the one turn.
    """

    context: str
    reply: str
    metadata: Mapping[str, str] = field(default_factory=dict)
    parts: tuple[str, ...] = ()

    def turns(self) -> tuple[str, ...]:
        """The non-blank context turns (``(context,)`` when no parts were given)."""
        kept = tuple(part.strip() for part in self.parts if part.strip())
        return kept or (self.context.strip(),)


def context_text(parts: Sequence[str]) -> str:
    """The conversation as one text, oldest first (blank parts skipped)."""
    return "\n\n".join(part.strip() for part in parts if part.strip())


def from_reply(reply: Reply) -> KarmaInput:
    return KarmaInput(context_text(reply.context), reply.text, reply.metadata, reply.context)


def header(variant: Variant, metadata: Mapping[str, str], *, order_blind: bool) -> str:
    """The metadata header the variant reads ('' for ``context_only``).

    >>> header("with_metadata", {"age": "3h", "depth": "1", "subreddit": "College"},
    ...        order_blind=True)
    'subreddit: College | depth: 1'
    """
    if variant == "context_only":
        return ""
    names = [n for n in FIELD_ORDER if n in metadata]
    names += sorted(n for n in metadata if n not in FIELD_ORDER)
    if order_blind:
        names = [n for n in names if n not in ORDER_FIELDS]
    return " | ".join(f"{name}: {metadata[name]}" for name in names)
