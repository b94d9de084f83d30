"""One token layout for training and scoring: ``[CLS] header context-tail [SEP] reply [SEP]``.

TRL's RewardTrainer drops a pair longer than ``max_length`` instead of truncating it, so every
input is cut here first: the reply keeps its beginning (up to the room left after
``min_context`` context tokens); the context is cut from the left, so the latest turn, nearest
the reply, survives, except for its first ``context_head`` tokens, which are kept too (a Reddit
post's title, a chat's first request: what the conversation is about); the header is kept.
A model without ``[CLS]``/``[SEP]`` (a decoder such as SmolLM2) gets its end-of-sequence token
as separator and end token instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from plaudit_wire.karma import Variant
from services.karma.data import KarmaDataError
from services.karma.features import KarmaInput, header


@dataclass(frozen=True, slots=True)
class Encoded:
    input_ids: list[int]
    token_type_ids: list[int] | None


class PairEncoder:
    """Encodes (context, reply) inputs of one variant for a Hugging Face tokenizer."""

    def __init__(
        self,
        tokenizer: Any,
        variant: Variant,
        max_length: int,
        *,
        min_context: int = 64,
        context_head: int = 0,
    ) -> None:
        sep = tokenizer.sep_token_id
        if sep is None:
            sep = tokenizer.eos_token_id
        if sep is None:
            raise KarmaDataError("the base model's tokenizer has neither [SEP] nor an end token")
        self.tokenizer = tokenizer
        self.variant = variant
        self.start = [] if tokenizer.cls_token_id is None else [tokenizer.cls_token_id]
        self.sep = int(sep)
        self.body = max_length - len(self.start) - 2
        if self.body < 8:
            raise KarmaDataError(f"max_length {max_length} leaves no room for text")
        self.min_context = min(min_context, self.body // 2)
        self.context_head = context_head
        self.types = "token_type_ids" in getattr(tokenizer, "model_input_names", [])

    def encode(self, inputs: Sequence[KarmaInput], *, order_blind: bool) -> list[Encoded]:
        """Token ids (and segment ids for BERT-style models) for each input."""
        headers = self._ids(
            [header(self.variant, i.metadata, order_blind=order_blind) for i in inputs]
        )
        contexts = self._ids([i.context for i in inputs])
        replies = self._ids([i.reply for i in inputs])
        return [self._layout(h, c, r) for h, c, r in zip(headers, contexts, replies, strict=True)]

    def _layout(self, head: list[int], context: list[int], reply: list[int]) -> Encoded:
        head = head[: self.body // 4]
        room = self.body - len(head)
        reply = reply[: room - min(len(context), self.min_context)]
        context = self._cut_context(context, room - len(reply))
        first = [*self.start, *head, *context, self.sep]
        ids = [*first, *reply, self.sep]
        types = [0] * len(first) + [1] * (len(reply) + 1) if self.types else None
        return Encoded(ids, types)

    def _cut_context(self, context: list[int], keep: int) -> list[int]:
        if len(context) <= keep:
            return context
        head = min(self.context_head, keep // 2)
        tail = keep - head
        return context[:head] + (context[len(context) - tail :] if tail > 0 else [])

    def _ids(self, texts: list[str]) -> list[list[int]]:
        """Token ids without special tokens; each distinct text is tokenized once."""
        unique = list(dict.fromkeys(texts))
        if not unique:
            return []
        encoded = self.tokenizer(unique, add_special_tokens=False)["input_ids"]
        by_text = dict(zip(unique, encoded, strict=True))
        return [list(by_text[t]) for t in texts]
