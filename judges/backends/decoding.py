"""Batched generation on the transformers runtime: samples, stops, schemas, shared prefixes.

:func:`generate` is :meth:`HFRuntime.generate <judges.backends.hf_runtime.HFRuntime.generate>`.
Each request becomes ``n`` rows (one per sample) with the same prompt. Rows are sorted by
length and cut into chunks like choice scoring; in each chunk the prompt head common to all
rows runs once (as choice scoring does, see :mod:`judges.backends.hf_runtime`), its KV
cache is copied to the rows, and then every row decodes from its own tail. The head common
to the whole call is computed once for all chunks, so a group's judge prompts (same
template and question) pay for it once.

Per row: greedy or seeded sampling (``temperature``, ``top_p``; sample ``k`` uses
``seed + k``), stop strings (the text ends just before the first one), and a JSON schema
enforced token by token through :mod:`judges.backends.constrained` (logits of tokens the
grammar forbids are set to -inf before the pick). A constrained row that runs out of
``max_new_tokens`` ends with ``finish_reason="length"`` and, usually, unfinished JSON:
:mod:`judges.generation` reports that as ``invalid_output``.
"""

from __future__ import annotations

import logging
import math
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from judges.backends.base import (
    FinishReason,
    GeneratedText,
    GenerateRequest,
    GenerateResult,
    validate_generate,
)
from judges.backends.batching import Row, pad_left, run_in_chunks, shared_prefix_length
from judges.backends.constrained import ConstraintError, GrammarCache, RowConstraints

if TYPE_CHECKING:
    from judges.backends.hf_runtime import HFRuntime

logger = logging.getLogger(__name__)

_GRAMMARS: weakref.WeakKeyDictionary[Any, GrammarCache] = weakref.WeakKeyDictionary()


@dataclass(frozen=True, slots=True)
class _Slot:
    """One sample of one request: the request's index and the sample's number."""

    owner: int
    sample: int
    request: GenerateRequest


def grammars(runtime: HFRuntime) -> GrammarCache:
    """The runtime's compiled-grammar cache (created on first use)."""
    cache = _GRAMMARS.get(runtime)
    if cache is None:
        vocab = int(getattr(runtime.model.config, "vocab_size", 0) or len(runtime.tokenizer))
        cache = _GRAMMARS[runtime] = GrammarCache(runtime.tokenizer, vocab, runtime.stop_ids)
    return cache


def generate(
    runtime: HFRuntime, requests: Sequence[GenerateRequest], deadline: float | None = None
) -> list[GenerateResult]:
    """Generate every request's samples; never raises for a single item."""
    failures: dict[int, GenerateResult] = {}
    slots: list[_Slot] = []
    rows: list[Row] = []
    for index, request in enumerate(requests):
        prepared = _prepare(runtime, index, request)
        if isinstance(prepared, GenerateResult):
            failures[index] = prepared
            continue
        for k in range(request.n):
            rows.append(Row(len(slots), prepared))
            slots.append(_Slot(index, k, request))
    done: list[GenerateResult | None] = [None] * len(slots)
    from judges.backends.hf_runtime import _PrefixKV  # hf_runtime imports this module

    common = _PrefixKV(rows[0].ids[: shared_prefix_length(rows)] if rows else [])

    def run(chunk: list[Row]) -> None:
        results = _decode(runtime, chunk, [slots[r.owner] for r in chunk], common, deadline)
        for row, result in zip(chunk, results, strict=True):
            done[row.owner] = result

    run_in_chunks(rows, runtime.max_batch_size, run, done, GenerateResult.failed, deadline)
    return _collect(len(requests), slots, done, failures)


def _prepare(
    runtime: HFRuntime, index: int, request: GenerateRequest
) -> GenerateResult | list[int]:
    problem = validate_generate(request)
    if problem:
        return GenerateResult.failed("invalid", problem)
    try:
        ids = runtime.encode_prompt(request.messages)
    except Exception as exc:
        logger.warning("generate item %d failed to encode: %s", index, exc)
        return GenerateResult.failed("error", f"encoding failed: {exc}")
    if len(ids) > runtime.max_input_tokens or len(ids) + request.max_new_tokens > (
        runtime.max_positions
    ):
        return GenerateResult.failed("invalid", f"prompt too long ({len(ids)} tokens)")
    if request.json_schema is not None:
        try:
            grammars(runtime).compile(request.json_schema)
        except ConstraintError as exc:
            return GenerateResult.failed("invalid", str(exc))
    return ids


def _collect(
    count: int,
    slots: list[_Slot],
    done: list[GenerateResult | None],
    failures: dict[int, GenerateResult],
) -> list[GenerateResult]:
    """One result per request: its samples in order, or the first failure among them."""
    samples: dict[int, list[GeneratedText]] = {}
    for slot, result in zip(slots, done, strict=True):
        if slot.owner in failures:
            continue
        if result is None or not result.ok:
            failures[slot.owner] = result or GenerateResult.failed("error", "not generated")
            continue
        samples.setdefault(slot.owner, []).extend(result.all_samples())
    out = []
    for index in range(count):
        if index in failures:
            out.append(failures[index])
        else:
            out.append(GenerateResult.of(samples[index]))
    return out


def _decode(
    runtime: HFRuntime, rows: list[Row], slots: list[_Slot], common: Any, deadline: float | None
) -> list[GenerateResult]:
    """Batched incremental decoding with a KV cache and per-row settings."""
    requests = [slot.request for slot in slots]
    skip = runtime._shared_length(rows)
    input_ids, mask, positions = pad_left(rows, runtime.pad_id, runtime.device, skip)
    cached: dict[str, Any] = {}
    if skip:
        prefix = runtime._prefix_cache(rows[0].ids[:skip], common)
        prefix.batch_repeat_interleave(len(rows))
        cached = {runtime._cache_kwarg: prefix}
    constraints = RowConstraints.build(grammars(runtime), [r.json_schema for r in requests])
    state = _State(runtime, slots)
    output = runtime.model(
        input_ids=input_ids,
        attention_mask=mask,
        position_ids=positions,
        use_cache=True,
        logits_to_keep=1,
        **cached,
    )
    for _ in range(max(r.max_new_tokens for r in requests)):
        if deadline is not None and time.monotonic() > deadline:
            return [GenerateResult.failed("timeout", "deadline exceeded while generating")] * len(
                rows
            )
        logits = output.logits[:, -1, :].float()
        active = ~state.done
        if constraints is not None:
            constraints.mask(logits, active)
        chosen = state.pick(logits)
        rejected = constraints.accept(chosen.tolist(), active.tolist()) if constraints else None
        state.advance(chosen, rejected)
        if bool(state.done.all()):
            break
        chosen = torch.where(state.done, torch.full_like(chosen, runtime.pad_id), chosen)
        mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=1)
        positions = positions[:, -1:] + 1
        output = runtime.model(
            input_ids=chosen[:, None],
            attention_mask=mask,
            position_ids=positions,
            use_cache=True,
            **{runtime._cache_kwarg: _output_cache(output)},
        )
    return state.results()


class _State:
    """Per-row decoding state: tokens so far, stops, budgets and sampling generators."""

    def __init__(self, runtime: HFRuntime, slots: list[_Slot]) -> None:
        self._runtime = runtime
        self._requests = [slot.request for slot in slots]
        self._generators = [_generator(s.request, s.sample) for s in slots]
        device = runtime.device
        self._budgets = torch.tensor([r.max_new_tokens for r in self._requests], device=device)
        self._stop_ids = torch.tensor(runtime.stop_ids, device=device)
        self.tokens: list[list[int]] = [[] for _ in slots]
        self.texts: list[str | None] = [None] * len(slots)  # set when a stop string ended it
        self.done = torch.zeros(len(slots), dtype=torch.bool, device=device)
        self.stopped = torch.zeros_like(self.done)
        self._steps = 0

    def pick(self, logits: torch.Tensor) -> torch.Tensor:
        """Greedy picks for every row, then a seeded sample for rows with temperature > 0."""
        chosen = logits.argmax(dim=-1)
        for i, (request, generator) in enumerate(
            zip(self._requests, self._generators, strict=True)
        ):
            if generator is not None and not bool(self.done[i]):
                chosen[i] = _sample(logits[i], request.temperature, request.top_p, generator)
        return chosen

    def advance(self, chosen: torch.Tensor, rejected: list[bool] | None) -> None:
        """Record this step's tokens and which rows ended (end token, stop string, budget)."""
        self._steps += 1
        hit_stop = torch.isin(chosen, self._stop_ids) & ~self.done
        ended = hit_stop.clone()
        for i in torch.nonzero(~self.done & ~hit_stop).flatten().tolist():
            if rejected is not None and rejected[i]:  # nothing the grammar allows: end here
                ended[i] = True
                continue
            self.tokens[i].append(int(chosen[i]))
            if self._requests[i].stop and self._cut_at_stop(i):
                ended[i] = True
        self.stopped |= ended
        self.done |= ended | (self._budgets <= self._steps)

    def _cut_at_stop(self, i: int) -> bool:
        text = self._runtime.tokenizer.decode(self.tokens[i], skip_special_tokens=True)
        cuts = [text.find(s) for s in self._requests[i].stop]
        found = [c for c in cuts if c >= 0]
        if not found:
            return False
        self.texts[i] = text[: min(found)]
        return True

    def results(self) -> list[GenerateResult]:
        out = []
        for i, tokens in enumerate(self.tokens):
            text = self.texts[i]
            if text is None:
                text = self._runtime.tokenizer.decode(tokens, skip_special_tokens=True)
            finish: FinishReason = "stop" if bool(self.stopped[i]) else "length"
            out.append(GenerateResult.of([GeneratedText(text, len(tokens), finish)]))
        return out


def _output_cache(output: Any) -> Any:
    cache = getattr(output, "cache", None)
    return cache if cache is not None else output.past_key_values


def _generator(request: GenerateRequest, sample: int) -> torch.Generator | None:
    if request.temperature == 0:
        return None
    generator = torch.Generator()
    if request.seed is None:
        generator.seed()
    else:
        generator.manual_seed(request.seed + sample)
    return generator


def _sample(
    logits: torch.Tensor, temperature: float, top_p: float, generator: torch.Generator
) -> int:
    probs = torch.softmax(logits / temperature, dim=-1)
    if not math.isfinite(float(probs.sum())):
        return int(torch.argmax(logits))
    if top_p < 1.0:
        ordered, order = torch.sort(probs, descending=True)
        # keep the smallest head whose mass reaches top_p (the token that crosses it included)
        keep = (ordered.cumsum(dim=-1) - ordered) < top_p
        probs = torch.zeros_like(probs).scatter(0, order[keep], ordered[keep])
    return int(torch.multinomial(probs.cpu(), 1, generator=generator))
