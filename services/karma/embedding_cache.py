"""Sentence embeddings of texts, computed once and kept on disk by content hash (issue 24).

The frozen-encoder KARMA model reads the same texts again and again (a thread's title is the
context of hundreds of replies; every run re-reads the whole training split), so each text is
embedded once per encoder and kept. The cache is a folder of shards, each an ``.npz`` of 16-byte
keys (a SHA-256 of the encoder id, its token limit and the text) and float16 unit vectors.
A shard is written to a temporary name and renamed, so a run killed half-way keeps every shard
it finished and two processes may fill one folder at once::

    cache = EmbeddingCache(folder, encoder)
    cache.ensure(texts, progress=print)   # embeds only the texts not yet in the folder
    matrix = cache.vectors(texts)         # float32, one row per text
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import uuid
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from services.core.models.embedder import SentenceTransformerEmbedder

Matrix = npt.NDArray[np.float32]
ProgressFn = Callable[[int, int, str], None]
#: Texts embedded between two shard writes (what a killed run loses at most).
SHARD_ROWS = 4096
#: The progress stage of :meth:`EmbeddingCache.ensure` (done and total count characters).
EMBED_STAGE = "embed characters"


class TextEncoder(Protocol):
    """A frozen sentence encoder: unit vectors, one per text."""

    @property
    def key(self) -> str:
        """What identifies its vectors (model id and token limit)."""
        ...

    @property
    def dimension(self) -> int: ...

    def encode(self, texts: list[str]) -> Matrix: ...


class MiniLMEncoder:
    """A sentence-transformers folder (the bundled all-MiniLM-L6-v2 by default), normalized:
    the same embedder class the services embed with, keyed by its folder and token limit.

    ``layers`` keeps only the first N transformer layers (mean pooling then reads layer N).
    Issue 24: the first run of the frozen method embeds every training text; on two CPU cores
    the six layers take about 25 minutes, the first three under 10 (BENCHMARKS.md).
    """

    def __init__(
        self,
        path: Path,
        *,
        max_seq_length: int = 256,
        layers: int | None = None,
        device: str = "cpu",
        batch_size: int = 64,
    ) -> None:
        self._embedder = SentenceTransformerEmbedder(
            path, device=device, batch_size=batch_size, max_seq_length=max_seq_length
        )
        self._key = f"{path.name}:{max_seq_length}"
        if layers is not None:
            self._embedder.keep_layers(layers)
            self._key += f":L{layers}"

    @property
    def key(self) -> str:
        return self._key

    @property
    def dimension(self) -> int:
        return self._embedder.dimension

    def encode(self, texts: list[str]) -> Matrix:
        return self._embedder.embed(texts)


class NoEncoder:
    """No embeddings at all (encoder ``none``): the head reads only the text features."""

    key = "none"
    dimension = 0

    def encode(self, texts: list[str]) -> Matrix:
        return np.zeros((len(texts), 0), np.float32)


def text_key(encoder_key: str, text: str) -> bytes:
    """16 bytes that name ``text`` embedded by the encoder ``encoder_key``."""
    return hashlib.sha256(f"{encoder_key}\x00{text}".encode()).digest()[:16]


class EmbeddingCache:
    """Vectors by content hash in ``folder`` (one sub-folder per encoder key)."""

    def __init__(self, folder: Path, encoder: TextEncoder) -> None:
        safe = encoder.key.replace("/", "_").replace(":", "-")
        self.folder = folder.expanduser() / safe
        self.encoder = encoder
        self._index: dict[bytes, int] = {}
        self._rows: list[npt.NDArray[np.float16]] = []
        self._matrix: npt.NDArray[np.float16] | None = None
        self._seen: set[str] = set()
        self._load_new_shards()

    def __len__(self) -> int:
        return len(self._index)

    def ensure(self, texts: Iterable[str], progress: ProgressFn | None = None) -> int:
        """Embed the texts not cached yet, a shard at a time; returns how many were embedded.

        ``progress`` counts characters (stage ``embed characters``), not texts: the texts go
        shortest first, so a count of texts made the time left look about half what it was.
        """
        self._load_new_shards()  # another process may have filled some meanwhile
        missing = self._missing(texts)
        total, done = sum(map(len, missing)), 0
        for start in range(0, len(missing), SHARD_ROWS):
            part = missing[start : start + SHARD_ROWS]
            self._write_shard(part, self.encoder.encode(part))
            done += sum(map(len, part))
            if progress is not None:
                progress(done, total, EMBED_STAGE)
        return len(missing)

    def vectors(self, texts: Sequence[str]) -> Matrix:
        """One float32 row per text; every text must be cached (see :meth:`ensure`)."""
        matrix = self._stacked()
        keys = [text_key(self.encoder.key, t) for t in texts]
        try:
            rows = [self._index[k] for k in keys]
        except KeyError:
            raise KeyError("a text is not in the embedding cache; call ensure() first") from None
        return matrix[rows].astype(np.float32) if rows else np.zeros((0, 0), np.float32)

    def _missing(self, texts: Iterable[str]) -> list[str]:
        unique = dict.fromkeys(texts)
        missing = [t for t in unique if text_key(self.encoder.key, t) not in self._index]
        missing.sort(key=len)  # similar lengths batch with little padding
        return missing

    def _write_shard(self, texts: list[str], vectors: Matrix) -> None:
        joined = b"".join(text_key(self.encoder.key, t) for t in texts)
        keys = np.frombuffer(joined, dtype=np.uint8).reshape(-1, 16)  # not "S16": it strips NULs
        self.folder.mkdir(parents=True, exist_ok=True)
        name = f"shard-{uuid.uuid4().hex}.npz"
        handle, temporary = tempfile.mkstemp(dir=self.folder, suffix=".partial")
        with os.fdopen(handle, "wb") as out:
            np.savez(out, keys=keys, vectors=vectors.astype(np.float16))
        os.rename(temporary, self.folder / name)
        self._add(name, keys, vectors.astype(np.float16))

    def _load_new_shards(self) -> None:
        if not self.folder.is_dir():
            return
        for path in sorted(self.folder.glob("shard-*.npz")):
            if path.name in self._seen:
                continue
            with np.load(path) as shard:
                self._add(path.name, shard["keys"], shard["vectors"])

    def _add(self, name: str, keys: Any, vectors: npt.NDArray[np.float16]) -> None:
        self._seen.add(name)
        base = sum(len(r) for r in self._rows)
        self._rows.append(vectors)
        self._matrix = None
        for offset, key in enumerate(keys):
            self._index.setdefault(key.tobytes(), base + offset)

    def _stacked(self) -> npt.NDArray[np.float16]:
        if self._matrix is None:
            dimension = self.encoder.dimension
            self._matrix = (
                np.concatenate(self._rows) if self._rows else np.zeros((0, dimension), np.float16)
            )
        return self._matrix
