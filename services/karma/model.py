"""A trained KARMA model: load its directory and score (context, reply) batches.

A model directory holds the Hugging Face files (``config.json``, ``model.safetensors``, the
tokenizer), ``karma.json`` (variant, max_length: how to encode an input) and ``metrics.json``
(the evaluation and the training parameters). :meth:`KarmaModel.score_batch` is a pure, blocking
batch function, made to sit behind a micro-batching model worker::

    model = KarmaModel.load(path)
    model.score_batch([("How do I pick a major?", "Take intro classes in a few."), ...])
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from plaudit_wire.karma import Variant
from services.karma.data import KarmaDataError
from services.karma.encoding import Encoded, PairEncoder
from services.karma.features import KarmaInput, context_text

if TYPE_CHECKING:
    import torch

CARD_FILE = "karma.json"
METRICS_FILE = "metrics.json"


def read_metrics(directory: Path | None) -> dict[str, Any]:
    """A model folder's ``metrics.json`` ({} when there is none), whichever method wrote it."""
    if directory is None or not (directory / METRICS_FILE).is_file():
        return {}
    data: dict[str, Any] = json.loads((directory / METRICS_FILE).read_text())
    return data


FORMAT_VERSION = 1


@dataclass(frozen=True)
class KarmaCard:
    """How a model encodes its inputs (``karma.json`` in the model directory)."""

    variant: Variant
    max_length: int
    min_context: int
    base_model: str
    context_head: int = 0
    format: int = FORMAT_VERSION

    def write(self, directory: Path) -> None:
        (directory / CARD_FILE).write_text(json.dumps(asdict(self), indent=2) + "\n")

    @classmethod
    def read(cls, directory: Path) -> KarmaCard:
        path = directory / CARD_FILE
        try:
            values = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise KarmaDataError(f"{directory}: not a KARMA model ({CARD_FILE}: {exc})") from None
        return cls(**values)


def collate(encoded: Sequence[Encoded], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-padded ``input_ids``, ``attention_mask`` and (BERT-style) ``token_type_ids``."""
    import torch

    width = max(len(e.input_ids) for e in encoded)
    ids = torch.full((len(encoded), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(encoded), width), dtype=torch.long)
    types = torch.zeros((len(encoded), width), dtype=torch.long)
    for row, item in enumerate(encoded):
        n = len(item.input_ids)
        ids[row, :n] = torch.tensor(item.input_ids)
        mask[row, :n] = 1
        if item.token_type_ids is not None:
            types[row, :n] = torch.tensor(item.token_type_ids)
    batch = {"input_ids": ids, "attention_mask": mask}
    if encoded[0].token_type_ids is not None:
        batch["token_type_ids"] = types
    return batch


def message_turns(messages: Sequence[Mapping[str, str]]) -> tuple[str, ...]:
    """Chat messages as ``role: content`` turns, oldest first."""
    return tuple(f"{m['role']}: {m['content']}" for m in messages)


class InputScorer:
    """What both KARMA models offer over their own ``score_inputs``: a score per (context,
    reply) and the scores of a group of replies to one context. Blocking: call from a worker
    thread."""

    def score_inputs(self, inputs: Sequence[KarmaInput], *, order_blind: bool) -> list[float]:
        raise NotImplementedError

    def score_batch(self, batch: Sequence[tuple[str, str]]) -> list[float]:
        """One score per (context, reply)."""
        return self.score_inputs([KarmaInput(c, r) for c, r in batch], order_blind=False)

    def score(
        self,
        context: str | Sequence[Mapping[str, str]],
        replies: Sequence[str],
        metadata: Mapping[str, str] | None = None,
    ) -> list[float]:
        """Scores of G replies to one context (text, or messages with role and content)."""
        turns = (context,) if isinstance(context, str) else message_turns(context)
        text = context_text(turns)
        inputs = [KarmaInput(text, reply, dict(metadata or {}), turns) for reply in replies]
        return self.score_inputs(inputs, order_blind=False)


class KarmaModel(InputScorer):
    """A sequence-classification model with one output: higher means more karma expected."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        card: KarmaCard,
        *,
        path: Path | None = None,
        batch_size: int = 32,
    ) -> None:
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.card = card
        self.path = path
        self.batch_size = batch_size
        self.encoder = PairEncoder(
            tokenizer,
            card.variant,
            card.max_length,
            min_context=card.min_context,
            context_head=card.context_head,
        )
        pad = tokenizer.pad_token_id
        self.pad_id = int(pad if pad is not None else tokenizer.eos_token_id)

    @classmethod
    def load(cls, path: Path | str, *, device: str = "cpu", batch_size: int = 32) -> KarmaModel:
        """Load a model directory written by :func:`services.karma.training.train_karma`."""
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        directory = Path(path).expanduser()
        card = KarmaCard.read(directory)
        tokenizer = AutoTokenizer.from_pretrained(directory)
        model = AutoModelForSequenceClassification.from_pretrained(directory).to(device)
        return cls(model, tokenizer, card, path=directory, batch_size=batch_size)

    @property
    def variant(self) -> Variant:
        return self.card.variant

    def metrics(self) -> dict[str, Any]:
        """The model's ``metrics.json`` ({} when it has none)."""
        return read_metrics(self.path)

    def score_inputs(self, inputs: Sequence[KarmaInput], *, order_blind: bool) -> list[float]:
        """Scores in input order; batches are formed by length to waste little on padding."""
        import torch

        if not inputs:
            return []
        encoded = self.encoder.encode(inputs, order_blind=order_blind)
        order = sorted(range(len(encoded)), key=lambda i: len(encoded[i].input_ids))
        scores = [0.0] * len(encoded)
        device = next(self.model.parameters()).device
        with torch.inference_mode():
            for start in range(0, len(order), self.batch_size):
                rows = order[start : start + self.batch_size]
                batch = collate([encoded[i] for i in rows], self.pad_id)
                logits = self.model(**{k: v.to(device) for k, v in batch.items()}).logits
                for i, value in zip(rows, logits[:, 0].float().tolist(), strict=True):
                    scores[i] = float(value)
        return scores


class ScoringModel(Protocol):
    """What serving and evaluation need of a loaded model, whichever method trained it."""

    @property
    def variant(self) -> Variant: ...

    def metrics(self) -> dict[str, Any]: ...

    def score_inputs(self, inputs: Sequence[KarmaInput], *, order_blind: bool) -> list[float]: ...

    def score(
        self,
        context: str | Sequence[Mapping[str, str]],
        replies: Sequence[str],
        metadata: Mapping[str, str] | None = None,
    ) -> list[float]: ...


def load_model(path: Path | str, *, device: str = "cpu", batch_size: int = 32) -> ScoringModel:
    """A trained model directory of either method: frozen-encoder head or fine-tuned encoder."""
    from services.karma.frozen import FrozenKarmaModel, is_frozen_model

    directory = Path(path).expanduser()
    if is_frozen_model(directory):
        return FrozenKarmaModel.load(directory, device=device, batch_size=batch_size)
    return KarmaModel.load(directory, device=device, batch_size=batch_size)
