"""USS-format dialogues (the shared SGD, MultiWOZ and CCPE-M files, or any file in that format)
turned into what the simulator learns from and is measured on.

A dialogue is a list of turns ``{role: user|system, text, satisfaction: [ratings] | null}``.
Consecutive turns of one speaker (CCPE-M transcripts split a user's answer into several) are
joined into one, so the dialogue alternates. A *user-turn example* is one real user turn with
everything said before it, whether it was the user's last turn, and its satisfaction label
(the mean of the annotators' 1-5 ratings, rounded; it rates the system turn just before).
"""

from __future__ import annotations

import gzip
import json
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from services.core.errors import InvalidInput
from services.datasets.store import missing_hint

#: The shared USS files by their short name.
SHARED_FILES = {"sgd": "sgd.jsonl.gz", "mwoz": "mwoz.jsonl.gz", "ccpe": "ccpe.jsonl.gz"}
SPLITS = ("train", "dev", "test")

#: The persona each shared domain's simulated user gets (the USS release has no written goals,
#: so a calibration learns a domain's users from the persona and the dialogue so far).
DOMAIN_GOALS = {
    "sgd": "You are a person asking a virtual assistant for help with an everyday task "
    "(weather, flights, restaurants, music, films, events, ...).",
    "mwoz": "You are a visitor to Cambridge asking a tourist information desk about "
    "restaurants, hotels, attractions, trains or taxis.",
    "ccpe": "You are a person telling an interviewer which films you like and dislike, and why.",
}
GENERIC_GOAL = "You are a person talking with an assistant to get something done."


class DialogueDataError(InvalidInput):
    """A dialogue file that cannot be used (422 at once when a request names it)."""


@dataclass(frozen=True, slots=True)
class Turn:
    role: str  # "user" or "system"
    text: str
    satisfaction: int | None  # 1..5 on user turns that were rated


@dataclass(frozen=True, slots=True)
class Dialogue:
    id: str
    domain: str
    split: str
    turns: tuple[Turn, ...]

    @property
    def goal(self) -> str:
        return DOMAIN_GOALS.get(self.domain, GENERIC_GOAL)

    @property
    def user_turns(self) -> int:
        return sum(t.role == "user" for t in self.turns)


@dataclass(frozen=True, slots=True)
class UserTurnExample:
    """One real user turn in its context."""

    dialogue_id: str
    domain: str
    goal: str
    history: tuple[Turn, ...]  # everything before the turn (may be empty: the opening turn)
    text: str
    satisfaction: int | None
    is_last: bool  # the user's last turn of the dialogue

    @property
    def last_system(self) -> str | None:
        """The system turn the satisfaction rating is about (None at the opening)."""
        for turn in reversed(self.history):
            if turn.role == "system":
                return turn.text
        return None


def rating(values: Any) -> int | None:
    """The annotators' mean rating, rounded half up to 1..5 (None when not rated)."""
    if not isinstance(values, list) or not values:
        return None
    numbers = [v for v in values if isinstance(v, int | float) and 1 <= v <= 5]
    if not numbers:
        return None
    return min(5, max(1, int(sum(numbers) / len(numbers) + 0.5)))


def parse_dialogue(row: Any, where: str, fallback_domain: str) -> Dialogue:
    if not isinstance(row, dict) or not isinstance(row.get("turns"), list):
        raise DialogueDataError(f"{where}: a dialogue must be an object with a 'turns' list")
    turns: list[Turn] = []
    for i, raw in enumerate(row["turns"]):
        if not isinstance(raw, dict) or raw.get("role") not in ("user", "system"):
            raise DialogueDataError(f"{where}: turn {i} needs role 'user' or 'system'")
        text = str(raw.get("text") or "").strip()
        if not text:
            continue
        score = rating(raw.get("satisfaction")) if raw["role"] == "user" else None
        if turns and turns[-1].role == raw["role"]:  # one speaker's turn split in pieces
            prev = turns[-1]
            joined = score if score is not None else prev.satisfaction
            turns[-1] = Turn(prev.role, f"{prev.text} {text}", joined)
        else:
            turns.append(Turn(raw["role"], text, score))
    split = row.get("split") if row.get("split") in SPLITS else _hash_split(str(row.get("id")))
    return Dialogue(
        id=str(row.get("id") or where),
        domain=str(row.get("domain") or fallback_domain),
        split=str(split),
        turns=tuple(turns),
    )


def _hash_split(key: str) -> str:
    """80/10/10 by a stable hash of the id, for files without a ``split`` field."""
    bucket = random.Random(key).random()
    return "train" if bucket < 0.8 else "dev" if bucket < 0.9 else "test"


def read_file(path: Path) -> list[Dialogue]:
    """Every dialogue of a USS-format JSONL file (``.gz`` or plain)."""
    opener: Any = gzip.open if path.suffix == ".gz" else open
    domain = path.name.split(".")[0]
    dialogues = []
    try:
        with opener(path, "rt", encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise DialogueDataError(f"{path}:{number}: not JSON ({exc.msg})") from None
                dialogues.append(parse_dialogue(row, f"{path}:{number}", domain))
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise DialogueDataError(f"{path}: cannot be read ({exc})", param="data") from None
    if not dialogues:
        raise DialogueDataError(f"{path}: no dialogues", param="data")
    return dialogues


def resolve_source(source: str, data_dir: Path, roots: Sequence[Path] = ()) -> Path:
    """A shared name (``sgd``, ``mwoz``, ``ccpe``) or a path inside ``data_dir`` or ``roots``."""
    if source in SHARED_FILES:
        path = data_dir / SHARED_FILES[source]
        if not path.is_file():
            raise DialogueDataError(
                f"the {source} dialogues of the uss dataset are not on this server ({path} is "
                f"missing): {missing_hint('uss')}",
                param="data",
            )
        return path
    path = Path(source).expanduser()
    allowed = [r.expanduser().resolve() for r in (data_dir, *roots)]
    path = (path if path.is_absolute() else data_dir / path).resolve()
    if not any(path.is_relative_to(root) for root in allowed):
        shown = ", ".join(str(r) for r in allowed)
        raise DialogueDataError(
            f"{source!r} is neither sgd, mwoz nor ccpe, nor a file inside the folders this "
            f"server reads dialogues from ({shown})",
            param="data",
        )
    if not path.is_file():
        raise DialogueDataError(f"no dialogue file {source!r} on the server", param="data")
    return path


def load(sources: Iterable[str], data_dir: Path, roots: Sequence[Path] = ()) -> list[Dialogue]:
    return [d for s in sources for d in read_file(resolve_source(s, data_dir, roots))]


def examples(dialogues: Iterable[Dialogue]) -> list[UserTurnExample]:
    """Every user turn of ``dialogues`` in its context."""
    out = []
    for dialogue in dialogues:
        last_user = max((i for i, t in enumerate(dialogue.turns) if t.role == "user"), default=-1)
        for i, turn in enumerate(dialogue.turns):
            if turn.role != "user":
                continue
            out.append(
                UserTurnExample(
                    dialogue_id=dialogue.id,
                    domain=dialogue.domain,
                    goal=dialogue.goal,
                    history=dialogue.turns[:i],
                    text=turn.text,
                    satisfaction=turn.satisfaction,
                    is_last=i == last_user,
                )
            )
    return out


def in_split(dialogues: Iterable[Dialogue], *splits: str) -> list[Dialogue]:
    return [d for d in dialogues if d.split in splits]


def sample_per_domain(
    items: Sequence[UserTurnExample], per_domain: int | None, seed: int
) -> list[UserTurnExample]:
    """At most ``per_domain`` examples of each domain, drawn with ``seed`` (None: all)."""
    by_domain: dict[str, list[UserTurnExample]] = {}
    for item in items:
        by_domain.setdefault(item.domain, []).append(item)
    rng = random.Random(seed)
    out: list[UserTurnExample] = []
    for domain in sorted(by_domain):
        group = by_domain[domain]
        if per_domain is not None and len(group) > per_domain:
            group = rng.sample(group, per_domain)
        out.extend(group)
    return out
