"""Scored conversations and sibling pairs: the shared reddit_karma data or a user's JSONL.

A :class:`Reply` is one scored reply with its conversational context (a tuple of texts: title,
post, parent comment; or a user's messages) and metadata as text fields. A :class:`Pair` is two
sibling replies, the preferred one first. :func:`load_data` reads either source; a line it
cannot use raises :class:`KarmaDataError` naming the file, the line and the field.

User JSONL, one object a line, either every line a scored reply::

    {"context": "text or [{role, content}]", "reply": "...", "score": 12, "thread_id": "t1",
     "metadata": {"subreddit": "College"}, "split": "train"}      # metadata, split, id optional

or every line a ready preference pair::

    {"context": "...", "chosen": "...", "rejected": "...", "thread_id": "t1",
     "score_chosen": 40, "score_rejected": 3}           # all but the first three optional

Scored replies become pairs by the Stanford Human Preferences rule (:func:`prefers`) among
siblings (same ``thread_id`` and context). Without ``split``, a thread goes to train, dev or test
(80/10/10) by a hash of its id.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
from collections import defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from services.core.errors import InvalidInput
from services.datasets.store import missing_hint

SPLITS = ("train", "dev", "test")
#: Metadata fields that reveal when a reply was posted; never shown in a pair test (see docs).
ORDER_FIELDS = frozenset({"age", "age_seconds", "created", "time", "timestamp", "position"})
#: At most this many pairs per parent, as in the shared data.
PAIRS_PER_PARENT = 8
SHARED_FILES = ("threads.jsonl.gz", "comments.jsonl.gz", "pairs.jsonl.gz")


class KarmaDataError(InvalidInput):
    """Data that cannot be used for training or evaluation (the message names line and field)."""


@dataclass(frozen=True, slots=True)
class Reply:
    """One reply: its context, text, score (None when unknown) and metadata as text fields."""

    id: str
    thread_id: str
    parent_key: str
    context: tuple[str, ...]
    text: str
    score: float | None
    split: str
    metadata: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Pair:
    """Two siblings; ``preferred`` got the higher score."""

    preferred: Reply
    other: Reply

    @property
    def thread_id(self) -> str:
        return self.preferred.thread_id

    @property
    def split(self) -> str:
        return self.preferred.split

    @property
    def ratio(self) -> float | None:
        """How many times more votes the preferred reply got (denominator at least 1)."""
        a, b = self.preferred.score, self.other.score
        if a is None or b is None:
            return None
        return a / max(b, 1.0)


@dataclass
class KarmaData:
    """Scored replies (for rank correlation and the ranking term) and sibling pairs."""

    replies: list[Reply]
    pairs: list[Pair]
    source: str

    def split(self, name: str) -> KarmaData:
        """Only the rows of one split (``train``, ``dev`` or ``test``)."""
        return KarmaData(
            replies=[r for r in self.replies if r.split == name],
            pairs=[p for p in self.pairs if p.split == name],
            source=f"{self.source}[{name}]",
        )

    def by_thread(self) -> dict[str, list[Reply]]:
        """Scored replies grouped by thread."""
        groups: dict[str, list[Reply]] = defaultdict(list)
        for reply in self.replies:
            if reply.score is not None:
                groups[reply.thread_id].append(reply)
        return dict(groups)

    def summary(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "replies": len(self.replies),
            "pairs": len(self.pairs),
            "threads": len({r.thread_id for r in self.replies} | {p.thread_id for p in self.pairs}),
        }


def prefers(a: float, b: float) -> bool:
    """The SHP rule: ``a`` got at least twice ``b``'s score (b counted as >= 1) and 2 more."""
    return a >= 2 * max(b, 1.0) and a - b >= 2


def load_data(source: str | Path, data_dir: Path) -> KarmaData:
    """``reddit_karma`` (the shared data in ``data_dir``), a folder in that format, or a JSONL."""
    path = data_dir if str(source) == "reddit_karma" else Path(source).expanduser()
    if str(source) == "reddit_karma" and not path.is_dir():
        raise KarmaDataError(
            f"the reddit_karma dataset is not in {path}: {missing_hint('reddit_karma')}",
            param="data",
        )
    if path.is_dir():
        return load_reddit_karma(path)
    if not path.is_file():
        raise KarmaDataError(f"{path}: no such file or folder", param="data")
    return load_jsonl(path)


# --- the shared reddit_karma format -----------------------------------------------------------


def load_reddit_karma(directory: Path) -> KarmaData:
    """Threads, comments and pairs from ``directory`` (the format of the shared README)."""
    missing = [name for name in SHARED_FILES if not (directory / name).is_file()]
    if missing:
        raise KarmaDataError(f"{directory}: missing {', '.join(missing)}", param="data")
    threads = {row["thread_id"]: row for _, row in _rows(directory / "threads.jsonl.gz")}
    comments = [row for _, row in _rows(directory / "comments.jsonl.gz")]
    replies = _shared_replies(threads, comments, directory)
    by_id = {reply.id: reply for reply in replies}
    pairs = []
    for line, row in _rows(directory / "pairs.jsonl.gz"):
        try:
            pairs.append(Pair(by_id[row["preferred"]], by_id[row["other"]]))
        except KeyError as exc:
            raise KarmaDataError(
                f"{directory / 'pairs.jsonl.gz'}, line {line}: comment {exc} is not in comments",
                param="data",
            ) from None
    return KarmaData(replies=replies, pairs=pairs, source=str(directory))


def _shared_replies(
    threads: Mapping[str, dict[str, Any]], comments: list[dict[str, Any]], directory: Path
) -> list[Reply]:
    first_seen: dict[str, int] = {}
    texts = {row["id"]: row["text"] for row in comments}
    for row in comments:
        first_seen[row["thread_id"]] = min(
            row["created"], first_seen.get(row["thread_id"], 1 << 62)
        )
    replies = []
    for row in comments:
        thread = threads.get(row["thread_id"])
        if thread is None:
            raise KarmaDataError(
                f"{directory}: comment {row['id']} has unknown thread {row['thread_id']}"
            )
        context: tuple[str, ...] = (thread["title"], thread["text"])
        if row["parent_id"] is not None and row["parent_id"] in texts:
            context = (*context, texts[row["parent_id"]])
        # The threads carry no post time: the thread's first comment stands in for it.
        metadata = {
            "subreddit": thread["subreddit"],
            "depth": str(row["depth"]),
            "age": age_text(row["created"] - first_seen[row["thread_id"]]),
        }
        replies.append(
            Reply(
                id=row["id"],
                thread_id=row["thread_id"],
                parent_key=row["parent_id"] or row["thread_id"],
                context=context,
                text=row["text"],
                score=float(row["score"]),
                split=row["split"],
                metadata=metadata,
            )
        )
    return replies


def age_text(seconds: float) -> str:
    """A coarse, readable age: ``0m``, ``45m``, ``5h``, ``3d``.

    >>> age_text(7300)
    '2h'
    """
    minutes = max(0, int(seconds // 60))
    if minutes < 60:
        return f"{minutes}m"
    if minutes < 48 * 60:
        return f"{minutes // 60}h"
    return f"{minutes // (24 * 60)}d"


# --- the user's JSONL -------------------------------------------------------------------------


class Message(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: str = Field(min_length=1)
    content: str


MetadataValue = str | int | float | bool


class _Row(BaseModel):
    model_config = ConfigDict(extra="forbid")

    context: str | list[Message]
    thread_id: str | None = Field(default=None, min_length=1)
    metadata: dict[str, MetadataValue] = Field(default_factory=dict)
    split: Literal["train", "dev", "test"] | None = None


_R = TypeVar("_R", bound=_Row)


class ScoredRow(_Row):
    """One scored reply."""

    thread_id: str = Field(min_length=1)
    reply: str = Field(min_length=1)
    score: float
    id: str | None = None

    @field_validator("score")
    @classmethod
    def _finite(cls, value: float) -> float:
        if not math.isfinite(value):
            raise ValueError("must be a finite number")
        return value


class PairRow(_Row):
    """One ready preference pair; the scores are optional (they give the score-ratio bins)."""

    chosen: str = Field(min_length=1)
    rejected: str = Field(min_length=1)
    score_chosen: float | None = None
    score_rejected: float | None = None


def load_jsonl(path: Path) -> KarmaData:
    """A user's JSONL: all scored replies or all preference pairs (see the module docstring)."""
    scored: list[Reply] = []
    pairs: list[Pair] = []
    kind: str | None = None
    for line, raw in _rows(path):
        row_kind = "pair" if "chosen" in raw or "rejected" in raw else "scored"
        if kind is not None and row_kind != kind:
            raise KarmaDataError(
                f"{path}, line {line}: a {row_kind} row in a file of {kind} rows "
                "(use one kind per file: scored replies or chosen/rejected pairs)",
                param="data",
            )
        kind = row_kind
        if row_kind == "pair":
            pairs.append(_pair_from_row(_validated(PairRow, raw, path, line), path, line))
        else:
            scored.append(_reply_from_row(_validated(ScoredRow, raw, path, line), path, line))
    if kind is None:
        raise KarmaDataError(f"{path}: no rows", param="data")
    if kind == "scored":
        pairs = sibling_pairs(scored)
    else:
        scored = [r for p in pairs for r in (p.preferred, p.other) if r.score is not None]
    if not pairs:
        raise KarmaDataError(
            f"{path}: no preference pairs: no two replies with the same thread_id and context "
            "differ enough in score (the preferred needs twice the other's score and 2 more)",
            param="data",
        )
    return KarmaData(replies=scored, pairs=pairs, source=str(path))


def _validated(model: type[_R], raw: dict[str, Any], path: Path, line: int) -> _R:
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise KarmaDataError(f"{path}, line {line}: {_describe(exc)}", param="data") from None


def _describe(exc: ValidationError) -> str:
    """The most specific error (for a union, the branch that got furthest), its field path."""
    error = max(exc.errors(), key=lambda e: len(e["loc"]))
    tags = {"str", "int", "float", "bool"}
    parts = [str(p) for p in error["loc"] if not (isinstance(p, str) and ("[" in p or p in tags))]
    return f"field '{'.'.join(parts)}': {error['msg']}"


def _context(value: str | list[Message]) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    return tuple(f"{m.role}: {m.content}" for m in value)


def _split_of(thread_id: str, given: str | None) -> str:
    if given is not None:
        return given
    bucket = int(hashlib.sha1(thread_id.encode()).hexdigest(), 16) % 10
    return "train" if bucket < 8 else ("dev" if bucket == 8 else "test")


def _reply_from_row(row: ScoredRow, path: Path, line: int) -> Reply:
    context = _context(row.context)
    return Reply(
        id=row.id or f"{path.name}:{line}",
        thread_id=row.thread_id,
        parent_key=f"{row.thread_id}\x00" + "\x00".join(context),
        context=context,
        text=row.reply,
        score=row.score,
        split=_split_of(row.thread_id, row.split),
        metadata={k: str(v) for k, v in row.metadata.items()},
    )


def _pair_from_row(row: PairRow, path: Path, line: int) -> Pair:
    context = _context(row.context)
    thread = row.thread_id or "ctx-" + hashlib.sha1("\x00".join(context).encode()).hexdigest()[:12]
    metadata = {k: str(v) for k, v in row.metadata.items()}

    def reply(text: str, score: float | None, which: str) -> Reply:
        return Reply(
            id=f"{path.name}:{line}:{which}",
            thread_id=thread,
            parent_key=f"{path.name}:{line}",
            context=context,
            text=text,
            score=score,
            split=_split_of(thread, row.split),
            metadata=metadata,
        )

    return Pair(
        reply(row.chosen, row.score_chosen, "chosen"),
        reply(row.rejected, row.score_rejected, "rejected"),
    )


def sibling_pairs(replies: list[Reply]) -> list[Pair]:
    """Pairs among siblings by :func:`prefers`; with ``created`` on both, the later must win.

    The later-wins condition is the SHP's guard against visibility: an earlier reply has had
    longer to collect votes. At most :data:`PAIRS_PER_PARENT` per parent, largest ratio first.
    """
    siblings: dict[str, list[Reply]] = defaultdict(list)
    for reply in replies:
        siblings[reply.parent_key].append(reply)
    pairs: list[Pair] = []
    for group in siblings.values():
        candidates = [Pair(a, b) for a in group for b in group if _valid_pair(a, b)]
        candidates.sort(key=lambda p: (-(p.ratio or 0.0), p.preferred.id, p.other.id))
        pairs.extend(candidates[:PAIRS_PER_PARENT])
    return pairs


def _valid_pair(a: Reply, b: Reply) -> bool:
    if a.score is None or b.score is None or not prefers(a.score, b.score):
        return False
    created_a, created_b = _created(a), _created(b)
    return created_a is None or created_b is None or created_a > created_b


def _created(reply: Reply) -> float | None:
    try:
        return float(reply.metadata["created"])
    except (KeyError, ValueError):
        return None


def _rows(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for every non-blank line; a line that is not an object raises."""
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", encoding="utf-8") as handle:
            for number, text in enumerate(handle, start=1):
                if text.strip():
                    yield number, _parse(text, path, number)
    except (OSError, UnicodeDecodeError) as exc:
        raise KarmaDataError(f"{path}: cannot read: {exc}", param="data") from None


def _parse(text: str, path: Path, line: int) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise KarmaDataError(f"{path}, line {line}: not JSON ({exc.msg})", param="data") from None
    if not isinstance(value, dict):
        raise KarmaDataError(f"{path}, line {line}: not a JSON object", param="data")
    return value
