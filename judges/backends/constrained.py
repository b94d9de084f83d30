"""Constrained decoding for the transformers runtime: JSON schemas through xgrammar.

Why xgrammar (tried on SmolLM2-135M-Instruct with transformers 5.24 and torch 2.13 CPU,
schema ``{"analysis": str (maxLength 200), "verdict": "A" | "B" | "tie"}``):

* xgrammar 0.2.9: the schema compiles in 0.75 s (tokenizer info included, once per
  tokenizer; compiled grammars are cached per schema); filling one row's token bitmask
  costs about 1-2 ms a step, next to ~100 ms for the model's step on CPU. It is the
  grammar engine vLLM uses by default for guided decoding, so the local and the served
  judge enforce schemas the same way.
* lm-format-enforcer 0.11.3: its transformers integration does not import under
  transformers 5 (``transformers.tokenization_utils.PreTrainedTokenizerBase`` is gone);
  built by hand, its tokenizer tree took 6.2 s and each step ~5 ms of Python per row.
* outlines-core 0.2.14: building the token index for the same schema took 8.3 s (per
  schema, since the regex grows with ``maxLength``), and the full ``outlines`` package
  pulls a much larger dependency tree for what we use.

One :class:`GrammarCache` per runtime compiles each schema once; :class:`RowConstraints`
holds one matcher per row of a decoding batch and masks the logits of the constrained
rows before the next token is picked (rows without a schema are left alone). xgrammar is
imported on first use, so a runtime that never gets a schema does not need it.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

import torch


class ConstraintError(ValueError):
    """A schema that cannot be compiled (or xgrammar is missing): the item is invalid."""


def schema_key(schema: Mapping[str, Any]) -> str:
    """The JSON text of a schema (the cache key). Keys keep their order: the grammar
    emits properties in the order the schema lists them (a judge's analysis before its
    verdict), so two schemas that differ only in order are different grammars."""
    return json.dumps(schema, separators=(",", ":"))


class GrammarCache:
    """Compiled JSON-schema grammars for one tokenizer, most recently used kept.

    ``vocab_size`` is the model's logit width (it may exceed the tokenizer's length);
    ``stop_ids`` are the end-of-turn tokens the grammar accepts once the JSON is complete.
    """

    def __init__(
        self, tokenizer: Any, vocab_size: int, stop_ids: Sequence[int], capacity: int = 64
    ) -> None:
        self._tokenizer = tokenizer
        self._vocab_size = vocab_size
        self._stop_ids = list(stop_ids)
        self._capacity = capacity
        self._compiler: Any = None
        self._compiled: OrderedDict[str, Any] = OrderedDict()
        self._lock = threading.Lock()

    def compile(self, schema: Mapping[str, Any]) -> Any:
        """The compiled grammar of ``schema``; raises :class:`ConstraintError`."""
        key = schema_key(schema)
        with self._lock:
            if key in self._compiled:
                self._compiled.move_to_end(key)
                return self._compiled[key]
            compiler = self._ensure_compiler()
            try:
                # any_whitespace=False: no free whitespace between tokens, so a small model
                # cannot pad forever, and the object ends with the closing brace.
                grammar = compiler.compile_json_schema(key, any_whitespace=False)
            except Exception as exc:  # xgrammar raises RuntimeError/ValueError on bad schemas
                raise ConstraintError(f"unsupported JSON schema: {exc}") from exc
            self._compiled[key] = grammar
            if len(self._compiled) > self._capacity:
                self._compiled.popitem(last=False)
            return grammar

    def _ensure_compiler(self) -> Any:
        if self._compiler is None:
            try:
                import xgrammar
            except ImportError as exc:
                raise ConstraintError(
                    "constrained decoding needs the xgrammar package (pip install xgrammar)"
                ) from exc
            info = xgrammar.TokenizerInfo.from_huggingface(
                self._tokenizer, vocab_size=self._vocab_size, stop_token_ids=self._stop_ids
            )
            self._compiler = xgrammar.GrammarCompiler(info, max_threads=1)
        return self._compiler

    @property
    def vocab_size(self) -> int:
        """The logit width the bitmasks cover."""
        return self._vocab_size


class RowConstraints:
    """One grammar matcher per constrained row of a decoding batch.

    ``grammars[i]`` is row ``i``'s compiled grammar, or None for a free row. Call
    :meth:`mask` on each step's logits, then :meth:`accept` with the picked tokens.
    """

    def __init__(self, grammars: Sequence[Any], vocab_size: int) -> None:
        import xgrammar

        self._xgr = xgrammar
        self._matchers = [None if g is None else xgrammar.GrammarMatcher(g) for g in grammars]
        self._rows = [i for i, m in enumerate(self._matchers) if m is not None]
        self._bitmask = xgrammar.allocate_token_bitmask(len(grammars), vocab_size)

    @classmethod
    def build(cls, cache: GrammarCache, schemas: Sequence[Mapping[str, Any] | None]) -> Any:
        """Constraints for rows with these schemas, or None when no row has one."""
        if all(s is None for s in schemas):
            return None
        grammars = [None if s is None else cache.compile(s) for s in schemas]
        return cls(grammars, cache.vocab_size)

    def mask(self, logits: torch.Tensor, active: torch.Tensor) -> None:
        """Set the logits of tokens the grammar forbids to -inf, in place (active rows)."""
        rows = [i for i in self._rows if bool(active[i])]
        if not rows:
            return
        for i in rows:
            matcher = self._matchers[i]
            assert matcher is not None
            matcher.fill_next_token_bitmask(self._bitmask, i)
        self._xgr.apply_token_bitmask_inplace(logits, self._bitmask.to(logits.device), indices=rows)

    def accept(self, tokens: Sequence[int], active: Sequence[bool]) -> list[bool]:
        """Advance each active constrained row by its token; True where the grammar rejected
        it (only when every token was masked: nothing valid can follow, the row ends)."""
        rejected = [False] * len(tokens)
        for i in self._rows:
            matcher = self._matchers[i]
            if matcher is None or not active[i] or matcher.is_terminated():
                continue
            rejected[i] = not matcher.accept_token(int(tokens[i]))
        return rejected
