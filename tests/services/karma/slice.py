"""A small slice of the local reddit_karma copy (tests/shared_data.py), in its own format.

The first threads (in file order) of each split that have sibling pairs, until each split has
enough pairs; threads, comments and pairs of those threads only, written gzipped like the
shared files, so ``data: reddit_karma`` pointed at the slice reads it the same way.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from tests.shared_data import shared_copy

SHARED = shared_copy("reddit_karma", "pairs.jsonl.gz")


def _read(path: Path) -> Any:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        for line in handle:
            yield json.loads(line)


def _write(path: Path, rows: list[dict[str, Any]]) -> None:
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        handle.writelines(json.dumps(row) + "\n" for row in rows)


def write_slice(out: Path, pairs_per_split: dict[str, int]) -> Path:
    """Write the slice into ``out`` (created); returns ``out``."""
    assert SHARED is not None
    wanted = dict(pairs_per_split)
    pairs: list[dict[str, Any]] = []
    threads: set[str] = set()
    for row in _read(SHARED / "pairs.jsonl.gz"):
        split = row["split"]
        if row["thread_id"] not in threads and wanted.get(split, 0) <= 0:
            continue
        threads.add(row["thread_id"])
        pairs.append(row)
        wanted[split] -= 1
        if all(n <= 0 for n in wanted.values()):
            break
    # keep whole threads of the pairs chosen (their later pairs too, for complete parents)
    out.mkdir(parents=True, exist_ok=True)
    comments = [c for c in _read(SHARED / "comments.jsonl.gz") if c["thread_id"] in threads]
    posts = [t for t in _read(SHARED / "threads.jsonl.gz") if t["thread_id"] in threads]
    ids = {c["id"] for c in comments}
    pairs = [p for p in pairs if p["preferred"] in ids and p["other"] in ids]
    _write(out / "threads.jsonl.gz", posts)
    _write(out / "comments.jsonl.gz", comments)
    _write(out / "pairs.jsonl.gz", pairs)
    return out
