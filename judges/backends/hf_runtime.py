"""Synchronous batched inference on a transformers causal LM (runs in a worker thread).

:class:`HFRuntime` owns a loaded model and tokenizer and implements the two backend
operations as blocking calls; :mod:`judges.backends.local` wraps it for asyncio.

Batching: prompts are sorted by length, cut into chunks of ``max_batch_size``, left
padded, and given explicit position ids (``cumsum(mask) - 1``), so a padded row computes
what it would alone, up to float rounding.

Choice scoring reads every candidate's first token from one forward pass over the prompt
(single-token candidates such as ``"A"``/``"B"`` need nothing more). Candidates with more
tokens are teacher-forced: their remaining tokens run on a copy of the prompt's KV cache
and their token log-probabilities are summed, so a 1..10 grade scale costs one prompt
pass plus a short one. If one candidate's tokens are a prefix of another's (``"1"`` and
``"10"``), every candidate is scored with the end-of-turn token appended, so ``"1"`` means
"exactly 1" rather than "starts with 1". Candidates are tokenized on their own, not
merged with the text before them.

Shared prefixes: the prompts of one call (both orders of every pair of a group) usually
share a long head (template, instructions, question). The head common to a chunk runs
once, as a batch of one, and its KV cache is copied to the chunk's rows, which then run
only their own tails. The head common to the whole call is computed in the first chunk
and reused by the next ones. When the model worker merged several callers into one call
(``sources``), their rows are first grouped by prefix, so callers on the same question
share its head and callers on different questions do not dilute each other's chunks.
"""

from __future__ import annotations

import copy
import functools
import inspect
import logging
import time
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from judges.backends import decoding, packing
from judges.backends.base import (
    ChatMessage,
    ChoiceRequest,
    ChoiceResult,
    GenerateRequest,
    GenerateResult,
    validate_choice,
)
from judges.backends.batching import (
    Row,
    pad_left,
    pad_token_id,
    prefix_groups,
    run_in_chunks,
    shared_prefix_length,
    stop_token_ids,
)
from judges.backends.sequence_scoring import has_prefix_pair

logger = logging.getLogger(__name__)

#: How many recent calls' common heads keep their KV cache (SmolLM2: ~45 KB per token).
RECENT_HEADS = 4

DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
}


@dataclass(slots=True)
class _PrefixKV:
    """A token prefix and, once some chunk has computed it, its batch-of-one KV cache.

    ``parent`` is a shorter prefix of it (a merged call's common head below one caller's
    group prefix) whose cache it is built on.
    """

    ids: list[int]
    parent: _PrefixKV | None = None
    cache: Any = None


class HFRuntime:
    """A loaded causal LM with batched choice scoring and generation (blocking).

    ``prefix_min_tokens``: choice scoring runs a prefix that all rows of a chunk share only
    once when it has at least this many tokens (0 turns sharing off). Models with
    sliding-window or recurrent layers never share.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        max_batch_size: int = 8,
        max_input_tokens: int = 2048,
        prefix_min_tokens: int = 16,
        pack_tails: bool = True,
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.max_batch_size = max_batch_size
        self.max_input_tokens = max_input_tokens
        self.prefix_min_tokens = prefix_min_tokens if _full_attention_only(model.config) else 0
        self.device = next(model.parameters()).device
        self.pad_id = pad_token_id(tokenizer)
        self.stop_ids = stop_token_ids(model, tokenizer)
        self.max_positions = int(getattr(model.config, "max_position_embeddings", 0) or 1 << 30)
        # transformers 5.2x renamed ``past_key_values`` to ``cache``; accept both.
        forward_params = inspect.signature(model.forward).parameters
        self._cache_kwarg = "cache" if "cache" in forward_params else "past_key_values"
        self._heads: dict[tuple[int, ...], Any] = {}  # insertion order: oldest first
        self.pack_tails = pack_tails and self.prefix_min_tokens > 0 and _packable(model)
        if self.pack_tails:
            decoder_params = inspect.signature(model.get_decoder().forward).parameters
            self._decoder_cache_kwarg = "cache" if "cache" in decoder_params else "past_key_values"

    @classmethod
    def load(
        cls, model_dir: Path, *, device: str = "cpu", dtype: str = "float32", **kwargs: Any
    ) -> HFRuntime:
        """Load a HF directory (local files only) onto ``device``."""
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
        model: Any = AutoModelForCausalLM.from_pretrained(
            str(model_dir), dtype=DTYPES[dtype], local_files_only=True
        )
        model.to(device).eval()
        return cls(model, tokenizer, **kwargs)

    # -- prompts ---------------------------------------------------------------------

    def encode_prompt(
        self, messages: Sequence[ChatMessage], assistant_prefix: str = ""
    ) -> list[int]:
        """Token ids of ``messages`` with the chat template and an open assistant turn."""
        text = self.tokenizer.apply_chat_template(
            [dict(m) for m in messages], tokenize=False, add_generation_prompt=True
        )
        ids: list[int] = self.tokenizer.encode(text + assistant_prefix, add_special_tokens=False)
        return ids

    def encode_candidate(self, candidate: str) -> list[int]:
        """Token ids of a candidate on its own."""
        ids: list[int] = self.tokenizer.encode(candidate, add_special_tokens=False)
        return ids

    # -- choice scoring --------------------------------------------------------------

    def score_choices(
        self,
        requests: Sequence[ChoiceRequest],
        deadline: float | None = None,
        sources: Sequence[Hashable] | None = None,
    ) -> list[ChoiceResult]:
        """Score every request; never raises for a single item.

        ``sources`` names the caller of each request when the model worker merged several
        callers into one call: rows are then grouped by prompt prefix
        (:func:`~judges.backends.batching.prefix_groups`) before they are cut into
        chunks, so each caller's shared head still runs once.
        """
        results: list[ChoiceResult | None] = [None] * len(requests)
        rows, targets = self._choice_rows(requests, results)
        common = self._recent_head(rows[0].ids[: shared_prefix_length(rows)] if rows else [])
        rows = self._score_packed(requests, targets, results, rows, common, deadline)
        for group in self._prefix_groups(rows, sources):
            node = common
            if len(group) < len(rows):
                node = _PrefixKV(group[0].ids[: shared_prefix_length(group)], parent=common)
            run = functools.partial(self._score_rows, requests, targets, results, node)
            run_in_chunks(group, self.max_batch_size, run, results, ChoiceResult.failed, deadline)
        self._remember_head(common)
        return [r if r is not None else ChoiceResult.failed("error", "not scored") for r in results]

    def _recent_head(self, ids: list[int]) -> _PrefixKV:
        """The call's common head, with its KV cache when a recent call computed the same
        head: a call too big for one model-worker window is split into several calls, which
        would otherwise each run the head again (rubric scoring: BENCHMARKS.md)."""
        cached = self._heads.get(tuple(ids))
        return _PrefixKV(ids, cache=cached)

    def _remember_head(self, head: _PrefixKV) -> None:
        """Keep the last few heads' caches (only ever deep-copied, never extended in place)."""
        if head.cache is None or not head.ids:
            return
        key = tuple(head.ids)
        self._heads.pop(key, None)
        self._heads[key] = head.cache
        while len(self._heads) > RECENT_HEADS:
            self._heads.pop(next(iter(self._heads)))

    def _score_packed(
        self,
        requests: Sequence[ChoiceRequest],
        targets: dict[int, list[list[int]]],
        results: list[ChoiceResult | None],
        rows: list[Row],
        common: _PrefixKV,
        deadline: float | None,
    ) -> list[Row]:
        """Score the rows that pack into families (:mod:`judges.backends.packing`); return
        the rest, and the rows of any batch that failed, for the ordinary path.

        Only rows whose candidates are all one token pack (their score is the first token's
        log-probability); multi-token candidates need the teacher-forced continuation.
        """
        if not self.pack_tails or not rows:
            return rows
        single = [r for r in rows if all(len(t) == 1 for t in targets[r.owner])]
        if len(single) < 2:
            return rows
        head = len(common.ids) if len(common.ids) >= self.prefix_min_tokens else 0
        found, _ = packing.families(single, head, self.prefix_min_tokens)
        if not found:
            return rows
        done: set[int] = set()
        for start in range(0, len(found), self.max_batch_size):
            if deadline is not None and time.monotonic() > deadline:
                break  # the ordinary path marks what is left as timed out
            batch = found[start : start + self.max_batch_size]
            try:
                with torch.inference_mode():
                    scores = self._run_packed(batch, common if head else None, targets)
            except Exception as exc:  # the ordinary path scores these rows instead
                logger.warning("a packed batch failed (%s); scoring its rows one by one", exc)
                continue
            for row, values in scores:
                results[row.owner] = ChoiceResult.from_logprobs(
                    requests[row.owner].candidates, values
                )
                done.add(row.owner)
        return [r for r in rows if r.owner not in done]

    def _run_packed(
        self,
        batch: Sequence[packing.Family],
        head: _PrefixKV | None,
        targets: dict[int, list[list[int]]],
    ) -> list[tuple[Row, list[float]]]:
        """One forward pass over packed families after the call's cached head."""
        skip = len(head.ids) if head is not None else 0
        packed = packing.pack(batch, skip, self.pad_id, self.model.dtype, self.device)
        cached: dict[str, Any] = {}
        if head is not None:
            cache = self._prefix_cache(head.ids, head)
            cache.batch_repeat_interleave(len(batch))
            cached = {self._decoder_cache_kwarg: cache}
        hidden = self.model.get_decoder()(
            input_ids=packed.input_ids,
            attention_mask=packed.attention_mask,
            position_ids=packed.position_ids,
            use_cache=head is not None,
            **cached,
        ).last_hidden_state
        index = [(b, end) for b, ends in enumerate(packed.ends) for end in ends]
        picked = hidden[[b for b, _ in index], [end for _, end in index]]
        logits = self.model.get_output_embeddings()(picked)
        logprobs = torch.log_softmax(logits.float(), dim=-1)
        rows = [row for family in batch for row in family.rows]
        return [
            (row, [float(logprobs[k, t[0]]) for t in targets[row.owner]])
            for k, row in enumerate(rows)
        ]

    def _choice_rows(
        self, requests: Sequence[ChoiceRequest], results: list[ChoiceResult | None]
    ) -> tuple[list[Row], dict[int, list[list[int]]]]:
        """One row per valid request, with its candidates' target ids; failures go to results."""
        rows: list[Row] = []
        targets: dict[int, list[list[int]]] = {}
        for index, request in enumerate(requests):
            try:
                prepared = self._prepare_choice(request)
            except Exception as exc:  # a tokenizer/template failure is this item's problem
                logger.warning("choice item %d failed to encode: %s", index, exc)
                results[index] = ChoiceResult.failed("error", f"encoding failed: {exc}")
                continue
            if isinstance(prepared, ChoiceResult):
                results[index] = prepared
                continue
            prompt, targets[index] = prepared
            rows.append(Row(index, prompt, weight=sum(len(t) > 1 for t in targets[index])))
        return rows, targets

    def _prefix_groups(
        self, rows: list[Row], sources: Sequence[Hashable] | None
    ) -> list[list[Row]]:
        """All rows as one group, or grouped by prefix when several callers were merged."""
        if sources is None or self.prefix_min_tokens == 0:
            return [rows]
        by_source: dict[Hashable, list[Row]] = {}
        for row in rows:
            by_source.setdefault(sources[row.owner], []).append(row)
        if len(by_source) < 2:
            return [rows]
        return prefix_groups(list(by_source.values()))

    def _score_rows(
        self,
        requests: Sequence[ChoiceRequest],
        targets: dict[int, list[list[int]]],
        results: list[ChoiceResult | None],
        prefix: _PrefixKV,
        chunk: list[Row],
    ) -> None:
        scores = self._score_chunk(chunk, [targets[row.owner] for row in chunk], prefix)
        for row, values in zip(chunk, scores, strict=True):
            results[row.owner] = ChoiceResult.from_logprobs(requests[row.owner].candidates, values)

    def _prepare_choice(
        self, request: ChoiceRequest
    ) -> ChoiceResult | tuple[list[int], list[list[int]]]:
        """The prompt's ids and each candidate's target ids, or why the item is invalid."""
        problem = validate_choice(request)
        if problem:
            return ChoiceResult.failed("invalid", problem)
        prompt = self.encode_prompt(request.messages, request.assistant_prefix)
        tokenized = [self.encode_candidate(c) for c in request.candidates]
        if any(not ids for ids in tokenized):
            return ChoiceResult.failed("invalid", "a candidate encodes to no tokens")
        if has_prefix_pair(tokenized):
            tokenized = [[*ids, self.stop_ids[0]] for ids in tokenized]
        longest = len(prompt) + max(len(ids) for ids in tokenized)
        if longest > min(self.max_input_tokens, self.max_positions):
            return ChoiceResult.failed("invalid", f"prompt too long ({len(prompt)} tokens)")
        return prompt, tokenized

    def _score_chunk(
        self, rows: list[Row], targets: list[list[list[int]]], common: _PrefixKV | None = None
    ) -> list[list[float]]:
        """Summed log-probabilities of each row's target sequences after its prompt.

        One pass over the prompts gives every candidate's first token; candidates with
        more tokens continue from the prompts' KV cache, copied once per candidate. A
        prefix shared by all rows comes from :meth:`_prefix_cache` (``common`` is the
        group's shared prefix, computed once for all its chunks).
        """
        skip = self._shared_length(rows)
        input_ids, mask, positions = pad_left(rows, self.pad_id, self.device, skip)
        continued = [
            (i, j) for i, cands in enumerate(targets) for j, t in enumerate(cands) if len(t) > 1
        ]
        cached: dict[str, Any] = {}
        if skip:
            prefix = self._prefix_cache(rows[0].ids[:skip], common)
            prefix.batch_repeat_interleave(len(rows))
            cached = {self._cache_kwarg: prefix}
        output = self.model(
            input_ids=input_ids,
            attention_mask=mask,
            position_ids=positions,
            use_cache=bool(continued or skip),
            logits_to_keep=1,
            **cached,
        )
        first = torch.log_softmax(output.logits[:, -1, :].float(), dim=-1)
        scores = [[float(first[i, t[0]]) for t in cands] for i, cands in enumerate(targets)]
        if continued:
            tails = [targets[i][j] for i, j in continued]
            owners = torch.tensor([i for i, _ in continued], device=self.device)
            for k, value in enumerate(self._continue(output, mask, positions, owners, tails)):
                i, j = continued[k]
                scores[i][j] += value
        return scores

    def _shared_length(self, rows: list[Row]) -> int:
        """How many leading tokens of ``rows`` to run once for all of them (0: none)."""
        if self.prefix_min_tokens == 0:
            return 0
        length = shared_prefix_length(rows)
        return length if length >= self.prefix_min_tokens else 0

    def _prefix_cache(self, ids: list[int], common: _PrefixKV | None) -> Any:
        """A fresh batch-of-one KV cache of ``ids``, built on the nearest of ``common`` and
        its parents that starts them (each computed once, on first use)."""
        node = common
        while node is not None and not (
            len(node.ids) >= self.prefix_min_tokens and ids[: len(node.ids)] == node.ids
        ):
            node = node.parent
        if node is None:
            return self._extend(None, ids, 0)
        if node.cache is None:
            node.cache = self._prefix_cache(node.ids, node.parent)
        return self._extend(copy.deepcopy(node.cache), ids[len(node.ids) :], len(node.ids))

    def _extend(self, cache: Any, ids: list[int], start: int) -> Any:
        """``cache`` (``start`` tokens, or None) after running ``ids`` on it."""
        if not ids:
            return cache
        end = start + len(ids)
        output = self.model(
            input_ids=torch.tensor([ids], device=self.device),
            attention_mask=torch.ones((1, end), dtype=torch.long, device=self.device),
            position_ids=torch.arange(start, end, device=self.device)[None],
            use_cache=True,
            logits_to_keep=1,
            **({self._cache_kwarg: cache} if cache is not None else {}),
        )
        return _output_cache(output)

    def _continue(
        self,
        output: Any,
        mask: torch.Tensor,
        positions: torch.Tensor,
        owners: torch.Tensor,
        targets: list[list[int]],
    ) -> list[float]:
        """Log-probability of each ``target[1:]`` given its cached prompt and ``target[0]``."""
        cache = _output_cache(output)
        cache.reorder_cache(owners)  # one copy of the prompt's cache per continued candidate
        width = max(len(t) for t in targets) - 1
        ids = torch.full((len(targets), width), self.pad_id, dtype=torch.long)
        tail_mask = torch.zeros((len(targets), width), dtype=torch.long)
        for r, target in enumerate(targets):
            ids[r, : len(target) - 1] = torch.tensor(target[:-1])
            tail_mask[r, : len(target) - 1] = 1
        steps = torch.arange(1, width + 1, device=self.device)
        logits = self.model(
            input_ids=ids.to(self.device),
            attention_mask=torch.cat([mask[owners], tail_mask.to(self.device)], dim=1),
            position_ids=positions[owners, -1:] + steps,
            use_cache=True,
            **{self._cache_kwarg: cache},
        ).logits
        logprobs = torch.log_softmax(logits.float(), dim=-1)
        # position p (fed target[p]) predicts target[p + 1]
        return [
            float(
                logprobs[r, : len(t) - 1]
                .gather(-1, torch.tensor(t[1:], device=self.device)[:, None])
                .sum()
            )
            for r, t in enumerate(targets)
        ]

    # -- generation ------------------------------------------------------------------

    def generate(
        self, requests: Sequence[GenerateRequest], deadline: float | None = None
    ) -> list[GenerateResult]:
        """Generate for every request (samples, stops, JSON schemas, shared-prefix reuse:
        see :mod:`judges.backends.decoding`); never raises for a single item."""
        return decoding.generate(self, requests, deadline)


def _full_attention_only(config: Any) -> bool:
    """True unless some layer is sliding-window or recurrent (their caches do not keep a
    whole prefix that padded tails could attend to)."""
    text_config = config.get_text_config() if hasattr(config, "get_text_config") else config
    layer_types = getattr(text_config, "layer_types", None) or []
    return getattr(text_config, "sliding_window", None) is None and all(
        kind == "full_attention" for kind in layer_types
    )


def _packable(model: Any) -> bool:
    """Whether packed tails can run on ``model``: a decoder and an output head to call apart,
    and logits that are the head's output as is (no final soft-capping)."""
    text_config = (
        model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    )
    if getattr(text_config, "final_logit_softcapping", None):
        return False
    try:
        return model.get_decoder() is not None and model.get_output_embeddings() is not None
    except (AttributeError, NotImplementedError):
        return False


def _output_cache(output: Any) -> Any:
    cache = getattr(output, "cache", None)
    return cache if cache is not None else output.past_key_values
