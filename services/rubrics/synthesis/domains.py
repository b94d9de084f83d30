"""Stage 2: a domain and a persona for each document.

ARES conditions generation on one of ten domain labels and a persona. METHODS.md does not
list the paper's ten, so these are ten broad domains that cover an encyclopedia. A document
gets the domain whose description is closest to it (cosine of MiniLM embeddings, the
project's embedder); a document close to none (best cosine under :data:`MIN_SIMILARITY`) is
rejected. The persona is one of the domain's three, picked by a hash of the seed and the
document id, so a run is reproducible.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

DOMAINS: dict[str, str] = {
    "science": "physics, chemistry, astronomy, mathematics, earth science and scientific laws",
    "health": "medicine, biology, anatomy, diseases, animals, plants and nutrition",
    "technology": "engineering, computing, inventions, machines, transport and industry",
    "history": "historical events, wars, empires, dynasties, revolutions and eras",
    "geography": "countries, cities, rivers, mountains, regions and the natural landscape",
    "arts": "painting, music, literature, film, architecture and famous artists and writers",
    "society": "politics, law, government, social movements, languages and education",
    "economics": "economy, business, trade, money, companies and work",
    "philosophy": "philosophy, religion, mythology, ethics and belief systems",
    "everyday life": "sports, games, food, clothing, hobbies, holidays and daily life",
}
PERSONAS: dict[str, tuple[str, str, str]] = {
    "science": ("a high-school physics student", "a science journalist", "a curious engineer"),
    "health": ("a nursing student", "a parent looking after a sick child", "a biology teacher"),
    "technology": ("a software developer", "a mechanical engineering student", "a retiree"),
    "history": ("a history undergraduate", "a museum guide", "a novelist doing research"),
    "geography": ("a traveller planning a trip", "a geography teacher", "a map enthusiast"),
    "arts": ("an art student", "a music lover", "a book club member"),
    "society": ("a civics student", "a local journalist", "a new citizen"),
    "economics": ("a small business owner", "an economics student", "a personal investor"),
    "philosophy": ("a philosophy undergraduate", "a religious studies teacher", "a skeptic"),
    "everyday life": ("a sports fan", "a home cook", "a quiz show contestant"),
}
MIN_SIMILARITY = 0.05


@dataclass(frozen=True)
class Assignment:
    domain: str | None
    persona: str | None
    similarity: float
    reason: str | None = None


def domain_texts() -> list[str]:
    return [f"{name}: {about}" for name, about in DOMAINS.items()]


def assign(
    document_vectors: np.ndarray,
    domain_vectors: np.ndarray,
    document_ids: Sequence[str],
    seed: int,
) -> list[Assignment]:
    """The closest domain of each document (rows of unit vectors) and a persona."""
    names = list(DOMAINS)
    if len(document_ids) == 0:
        return []
    similarity = document_vectors @ domain_vectors.T
    out = []
    for row, doc_id in zip(similarity, document_ids, strict=True):
        best = int(np.argmax(row))
        score = float(row[best])
        if score < MIN_SIMILARITY:
            out.append(Assignment(None, None, score, f"no_domain: best cosine {score:.2f}"))
            continue
        out.append(Assignment(names[best], persona(names[best], doc_id, seed), score))
    return out


def persona(domain: str, document_id: str, seed: int) -> str:
    options = PERSONAS[domain]
    digest = hashlib.sha256(f"{seed}:{document_id}".encode()).digest()
    return options[digest[0] % len(options)]
