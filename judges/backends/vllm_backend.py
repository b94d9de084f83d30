"""A judge backend that runs vLLM in this process, for a GPU box.

``vllm`` is imported only when the engine loads (:meth:`VLLMBackend.start`). The engine is
vLLM's async engine (``AsyncLLMEngine``, which is ``AsyncLLM`` in vLLM's V1), built from the
role's settings (dtype, max_model_len, gpu_memory_utilization, tensor_parallel_size,
enforce_eager and any other engine argument: docs/models.md) with
``enable_prefix_caching=True``, since judge prompts share long system prompts and rubrics.
Every row of every call is its own engine request, so the rows of concurrent calls are
batched together by vLLM's scheduler (issue 19: with ``vllm.LLM`` on one thread, 8
concurrent calls ran one after another). Tokenization runs in a worker thread, never on the
event loop. Building the engine off the main thread needs vLLM >= 0.10.2
(vllm-project/vllm#23298).

Choice scoring, per request:

* every candidate a single, distinct token: one row with
  ``SamplingParams(max_tokens=1, logprobs=top_logprobs)``, the candidates read from the
  next-token list. A request with a candidate outside that list is rescored exactly by
  the second path instead of getting a floor value.
* otherwise: one row ``prompt + candidate`` per candidate with ``prompt_logprobs=1``, the
  candidate's token logprobs summed. If one candidate's tokens are a prefix of another's
  (``"1"`` and ``"10"``), every candidate gets the end-of-turn token appended, so ``"1"``
  means "exactly 1". vLLM bypasses its prefix cache for ``prompt_logprobs`` rows.

Prompts are built as in the transformers backend (chat template with an open assistant
turn, then ``assistant_prefix``; candidates tokenized on their own), so both backends
score the same checkpoint alike.

Example::

    async with VLLMBackend("/data/models/Qwen2.5-7B-Instruct", dtype="bfloat16") as backend:
        [res] = await backend.score_choices([ChoiceRequest([user("A or B?")], ["A", "B"])])
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from judges.backends.base import (
    BackendInfo,
    ChatMessage,
    ChoiceRequest,
    ChoiceResult,
    GeneratedText,
    GenerateRequest,
    GenerateResult,
    ItemStatus,
    validate_choice,
    validate_generate,
)
from judges.backends.sequence_scoring import has_prefix_pair
from judges.lifecycle import Readiness, State

logger = logging.getLogger(__name__)

BACKEND_NAME = "vllm"
R = TypeVar("R", ChoiceResult, GenerateResult)


@dataclass(frozen=True, slots=True)
class _Row:
    owner: int  # the index of the request it serves; ``target``: the scored tail of ``ids``
    ids: list[int]
    target: list[int]


class Engine(Protocol):
    """What the runtime needs of an engine: its tokenizer, and rows run concurrently."""

    def get_tokenizer(self) -> Any:
        """The engine's (HF-like) tokenizer."""
        ...

    async def generate_rows(
        self, prompts: Sequence[Mapping[str, list[int]]], params: Sequence[Any]
    ) -> list[Any]:
        """One ``RequestOutput`` per prompt, in order; an exception object for a row that
        failed on its own (or raises for the whole call)."""
        ...


class AsyncEngineRows:
    """:class:`Engine` over vLLM's ``AsyncLLM``: each row is its own engine request, sent
    at once, so vLLM's scheduler batches the rows of every concurrent call together. A row
    cancelled (a timeout) is aborted in the engine by vLLM's own ``generate``."""

    def __init__(self, engine: Any, tokenizer: Any) -> None:
        self.engine = engine
        self.tokenizer = tokenizer
        self.model_config = getattr(engine, "model_config", None)

    def get_tokenizer(self) -> Any:
        return self.tokenizer

    async def generate_rows(
        self, prompts: Sequence[Mapping[str, list[int]]], params: Sequence[Any]
    ) -> list[Any]:
        rows = (self._one(p, sp) for p, sp in zip(prompts, params, strict=True))
        return list(await asyncio.gather(*rows, return_exceptions=True))

    async def _one(self, prompt: Mapping[str, list[int]], params: Any) -> Any:
        final = None
        async for output in self.engine.generate(dict(prompt), params, uuid.uuid4().hex):
            final = output  # cumulative outputs: the last one holds the whole request
        if final is None:
            raise RuntimeError("the engine finished the request without an output")
        return final

    def shutdown(self) -> None:
        self.engine.shutdown()


class VLLMRuntime:
    """Choice scoring and generation on an async vLLM engine (an :class:`Engine`).

    ``sampling_params`` is ``vllm.SamplingParams`` (injectable so the plumbing can be
    tested without a GPU); ``structured`` names the ``SamplingParams`` field for guided
    decoding and its parameter class (see :func:`guided_decoding`).
    """

    def __init__(
        self,
        llm: Engine,
        sampling_params: Callable[..., Any],
        *,
        top_logprobs: int = 20,
        max_model_len: int | None = None,
        structured: tuple[str, Callable[..., Any]] | None = None,
    ) -> None:
        self.llm = llm
        self.sampling_params = sampling_params
        self.structured = structured
        self.top_logprobs = top_logprobs
        self.tokenizer = llm.get_tokenizer()
        self.max_len = max_model_len or _engine_max_len(llm)
        eos = self.tokenizer.eos_token_id
        if eos is None:
            raise ValueError("the tokenizer defines no end-of-sequence token")
        self.eos_id = int(eos)

    def encode_prompt(self, messages: Sequence[ChatMessage], prefix: str = "") -> list[int]:
        """Token ids of ``messages`` with the chat template, an open assistant turn and prefix."""
        text = self.tokenizer.apply_chat_template(
            [dict(m) for m in messages], tokenize=False, add_generation_prompt=True
        )
        ids: list[int] = self.tokenizer.encode(text + prefix, add_special_tokens=False)
        return ids

    def encode_candidate(self, candidate: str) -> list[int]:
        """Token ids of a candidate on its own."""
        ids: list[int] = self.tokenizer.encode(candidate, add_special_tokens=False)
        return ids

    async def score_choices(self, requests: Sequence[ChoiceRequest]) -> list[ChoiceResult]:
        """Score every request; never raises for a single item."""
        results, next_rows, forced = await asyncio.to_thread(self._prepare_choices, requests)
        for row, result in await self._run(
            next_rows, self._next_token_params(), results, ChoiceResult.failed
        ):
            choice = self._from_next_token(requests[row.owner].candidates, result)
            if choice is None:  # a candidate is outside the top list: score it exactly
                forced.extend(self._forced_rows(row.owner, row.ids, requests[row.owner]))
            else:
                results[row.owner] = choice
        await self._score_forced(requests, forced, results)
        return [r or ChoiceResult.failed("error", "not scored") for r in results]

    def _prepare_choices(
        self, requests: Sequence[ChoiceRequest]
    ) -> tuple[list[ChoiceResult | None], list[_Row], list[_Row]]:
        """Tokenized rows: next-token rows, teacher-forced rows, and the items already
        decided (invalid or failed to encode)."""
        results: list[ChoiceResult | None] = [None] * len(requests)
        next_rows: list[_Row] = []
        forced: list[_Row] = []
        for index, request in enumerate(requests):
            prepared = self._prepare_choice(index, request)
            if isinstance(prepared, ChoiceResult):
                results[index] = prepared
            elif len(prepared) == 1 and not prepared[0].target:
                next_rows.extend(prepared)
            else:
                forced.extend(prepared)
        return results, next_rows, forced

    def _prepare_choice(self, index: int, request: ChoiceRequest) -> ChoiceResult | list[_Row]:
        problem = validate_choice(request)
        if problem:
            return ChoiceResult.failed("invalid", problem)
        try:
            prompt = self.encode_prompt(request.messages, request.assistant_prefix)
            tokenized = [self.encode_candidate(c) for c in request.candidates]
        except Exception as exc:  # a template or tokenizer failure is this item's problem
            logger.warning("choice item %d failed to encode: %s", index, exc)
            return ChoiceResult.failed("error", f"encoding failed: {exc}")
        if any(not ids for ids in tokenized):
            return ChoiceResult.failed("invalid", "a candidate encodes to no tokens")
        if len(prompt) + max(len(ids) for ids in tokenized) + 2 > self.max_len:
            return ChoiceResult.failed("invalid", f"prompt too long ({len(prompt)} tokens)")
        firsts = {ids[0] for ids in tokenized}
        if all(len(ids) == 1 for ids in tokenized) and len(firsts) == len(tokenized):
            return [_Row(index, prompt, [])]
        return self._forced_rows(index, prompt, request, tokenized)

    def _forced_rows(
        self,
        owner: int,
        prompt: list[int],
        request: ChoiceRequest,
        tokenized: list[list[int]] | None = None,
    ) -> list[_Row]:
        tokenized = tokenized or [self.encode_candidate(c) for c in request.candidates]
        if has_prefix_pair(tokenized):
            tokenized = [[*ids, self.eos_id] for ids in tokenized]
        return [_Row(owner, prompt + ids, ids) for ids in tokenized]

    def _next_token_params(self) -> Any:
        return self.sampling_params(max_tokens=1, temperature=0.0, logprobs=self.top_logprobs)

    def _from_next_token(self, candidates: Sequence[str], output: Any) -> ChoiceResult | None:
        listed = {int(t): float(lp.logprob) for t, lp in output.outputs[0].logprobs[0].items()}
        ids = [self.encode_candidate(c)[0] for c in candidates]
        if any(i not in listed for i in ids):
            return None
        return ChoiceResult.from_logprobs(candidates, [listed[i] for i in ids])

    async def _score_forced(
        self,
        requests: Sequence[ChoiceRequest],
        rows: list[_Row],
        results: list[ChoiceResult | None],
    ) -> None:
        params = self.sampling_params(max_tokens=1, temperature=0.0, prompt_logprobs=1)
        sums: dict[int, list[float]] = {}
        for row, output in await self._run(rows, params, results, ChoiceResult.failed):
            positions = output.prompt_logprobs[len(row.ids) - len(row.target) :]
            picked = zip(positions, row.target, strict=True)
            sums.setdefault(row.owner, []).append(sum(float(p[t].logprob) for p, t in picked))
        for owner, values in sums.items():
            if results[owner] is None and len(values) == len(requests[owner].candidates):
                results[owner] = ChoiceResult.from_logprobs(requests[owner].candidates, values)

    async def generate(self, requests: Sequence[GenerateRequest]) -> list[GenerateResult]:
        """Generate for every request at once; never raises for a single item."""
        results, rows, params = await asyncio.to_thread(self._prepare_generates, requests)
        for row, output in await self._run(rows, params, results, GenerateResult.failed):
            results[row.owner] = GenerateResult.of(
                [
                    GeneratedText(
                        completion.text,
                        len(completion.token_ids),
                        "length" if completion.finish_reason == "length" else "stop",
                    )
                    for completion in output.outputs
                ]
            )
        return [r or GenerateResult.failed("error", "not generated") for r in results]

    def _prepare_generates(
        self, requests: Sequence[GenerateRequest]
    ) -> tuple[list[GenerateResult | None], list[_Row], list[Any]]:
        results: list[GenerateResult | None] = [None] * len(requests)
        rows: list[_Row] = []
        params: list[Any] = []
        for index, request in enumerate(requests):
            prepared = self._prepare_generate(index, request)
            if isinstance(prepared, GenerateResult):
                results[index] = prepared
                continue
            rows.append(prepared)
            params.append(self._generate_params(request))
        return results, rows, params

    def _generate_params(self, request: GenerateRequest) -> Any:
        """Sampling parameters, with the JSON schema as guided decoding when there is one."""
        extra: dict[str, Any] = {}
        if request.top_p < 1.0:
            extra["top_p"] = request.top_p
        if request.stop:
            extra["stop"] = list(request.stop)
        if request.n > 1:
            extra["n"] = request.n
        if request.json_schema is not None:
            if self.structured is None:
                raise ValueError("this vLLM has no guided decoding")
            field_name, params_class = self.structured
            extra[field_name] = _guided(params_class, dict(request.json_schema))
        return self.sampling_params(
            max_tokens=request.max_new_tokens,
            temperature=request.temperature,
            seed=request.seed if request.temperature > 0 else None,
            **extra,
        )

    def _prepare_generate(self, index: int, request: GenerateRequest) -> GenerateResult | _Row:
        problem = validate_generate(request)
        if problem:
            return GenerateResult.failed("invalid", problem)
        try:
            ids = self.encode_prompt(request.messages)
        except Exception as exc:
            logger.warning("generate item %d failed to encode: %s", index, exc)
            return GenerateResult.failed("error", f"encoding failed: {exc}")
        if len(ids) + request.max_new_tokens > self.max_len:
            return GenerateResult.failed("invalid", f"prompt too long ({len(ids)} tokens)")
        if request.json_schema is not None and self.structured is None:
            return GenerateResult.failed("invalid", "this vLLM has no guided decoding")
        return _Row(index, ids, [])

    async def _run(
        self,
        rows: list[_Row],
        params: Any,
        results: list[R | None],
        failed: Callable[[ItemStatus, str], R],
    ) -> list[tuple[_Row, Any]]:
        """``rows`` through the engine at once; a failed row (or call) fails its owner."""
        if not rows:
            return []
        prompts = [{"prompt_token_ids": row.ids} for row in rows]
        per_row = params if isinstance(params, list) else [params] * len(rows)
        try:
            outputs = await self.llm.generate_rows(prompts, per_row)
        except Exception as exc:
            logger.exception("vLLM call with %d prompts failed", len(rows))
            outputs = [exc] * len(rows)
        done: list[tuple[_Row, Any]] = []
        for row, output in zip(rows, outputs, strict=True):
            if isinstance(output, BaseException):
                results[row.owner] = failed("error", f"{type(output).__name__}: {output}")
            elif results[row.owner] is None:
                done.append((row, output))
        return done


def guided_decoding() -> tuple[str, Callable[..., Any]] | None:
    """vLLM's guided decoding: ``SamplingParams(structured_outputs=StructuredOutputsParams
    (json=...))`` from vLLM 0.11 on, ``guided_decoding=GuidedDecodingParams(json=...)``
    before; None when neither exists."""
    try:
        from vllm.sampling_params import StructuredOutputsParams

        return "structured_outputs", StructuredOutputsParams
    except ImportError:
        pass
    try:
        from vllm.sampling_params import GuidedDecodingParams

        return "guided_decoding", GuidedDecodingParams
    except ImportError:
        return None


def _guided(params_class: Callable[..., Any], schema: dict[str, Any]) -> Any:
    """Guided decoding of ``schema`` with no free whitespace between JSON tokens, where the
    vLLM version has that switch: small models otherwise pad the object with newlines until
    ``max_tokens`` runs out (seen with SmolLM2 on vLLM 0.32)."""
    try:
        return params_class(json=schema, disable_any_whitespace=True)
    except TypeError:
        return params_class(json=schema)


def _engine_max_len(llm: Any) -> int:
    for owner in (getattr(llm, "llm_engine", None), llm):
        config = getattr(owner, "model_config", None)
        if config is not None and getattr(config, "max_model_len", None):
            return int(config.max_model_len)
    return 1 << 30


class VLLMBackend:
    """:class:`~judges.backends.base.JudgeBackend` over vLLM's async engine in this process.

    ``model`` is a local HF directory, a ``.gguf`` file or None (both resolved and, for
    GGUF, converted once into ``cache_dir`` by :mod:`judges.backends.convert`; None is the
    bundled SmolLM2), or a hub id passed to vLLM as is. The named engine arguments and
    ``engine_kwargs`` (``quantization``, ...) go to ``AsyncEngineArgs``; settings build them
    with :func:`judges.backends.factory.vllm_engine_args`. ``timeout_s`` bounds each call:
    items not back by then are ``timeout`` and their engine requests are aborted.
    Construction is cheap; :meth:`start` builds the engine (in a worker thread).
    """

    def __init__(
        self,
        model: str | os.PathLike[str] | None = None,
        *,
        cache_dir: Path | None = None,
        dtype: str = "auto",
        gpu_memory_utilization: float = 0.85,
        max_model_len: int | None = None,
        tensor_parallel_size: int = 1,
        enforce_eager: bool = False,
        top_logprobs: int = 20,
        timeout_s: float | None = None,
        engine_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        if top_logprobs < 1:
            raise ValueError("top_logprobs must be at least 1")
        self._model_ref = model
        self._cache_dir = cache_dir
        self._engine_kwargs: dict[str, Any] = {
            "dtype": dtype,
            "gpu_memory_utilization": gpu_memory_utilization,
            "max_model_len": max_model_len,
            "tensor_parallel_size": tensor_parallel_size,
            "enforce_eager": enforce_eager,
            "max_logprobs": top_logprobs,
            "enable_prefix_caching": True,
            **(engine_kwargs or {}),
        }
        self._top_logprobs = top_logprobs
        self._timeout_s = timeout_s
        self._runtime: VLLMRuntime | None = None
        self._model_name: str | None = None
        self._start_lock = asyncio.Lock()
        self._state: State = "idle"
        self._start_error: str | None = None

    @property
    def engine_args(self) -> dict[str, Any]:
        """The arguments the engine is (or will be) built with, unset ones left out."""
        return {k: v for k, v in self._engine_kwargs.items() if v is not None}

    @property
    def info(self) -> BackendInfo:
        """Backend name and model id (the model directory's name, or the hub id)."""
        name = self._model_name or (
            "SmolLM2-135M-Instruct" if self._model_ref is None else Path(self._model_ref).name
        )
        details = {k: str(v) for k, v in self.engine_args.items()}
        details["choice_scoring"] = "sequence"  # multi-token candidates are teacher-forced
        return BackendInfo(name=BACKEND_NAME, model_id=name, details=details)

    async def start(self) -> None:
        """Resolve the model and build the engine in a worker thread. Idempotent."""
        async with self._start_lock:
            if self._runtime is not None:
                return
            started = time.monotonic()
            self._state, self._start_error = "loading", None
            try:
                self._runtime = await self._load()
            except Exception as exc:
                self._state, self._start_error = "failed", f"{type(exc).__name__}: {exc}"
                raise
            self._state = "ready"
            logger.info(
                "loaded vLLM judge %s in %.1fs", self._model_name, time.monotonic() - started
            )

    @property
    def readiness(self) -> Readiness:
        """``ready`` once the engine is built; ``failed`` with the reason it could not be."""
        return Readiness(self._state, self._start_error)

    async def aclose(self) -> None:
        """Shut the engine down (its engine-core process with it)."""
        runtime, self._runtime = self._runtime, None
        self._state = "closed"
        shutdown = getattr(runtime.llm, "shutdown", None) if runtime is not None else None
        if callable(shutdown):
            await asyncio.to_thread(shutdown)

    async def __aenter__(self) -> VLLMBackend:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def score_choices(self, requests: Sequence[ChoiceRequest]) -> list[ChoiceResult]:
        """Score every request; its rows run in the engine with every other call's."""
        if not requests:
            return []
        runtime = await self._ready()
        return await self._call(runtime.score_choices(requests), len(requests), ChoiceResult.failed)

    async def generate(self, requests: Sequence[GenerateRequest]) -> list[GenerateResult]:
        """Generate every reply; its rows run in the engine with every other call's."""
        if not requests:
            return []
        runtime = await self._ready()
        return await self._call(runtime.generate(requests), len(requests), GenerateResult.failed)

    async def _load(self) -> VLLMRuntime:
        import vllm

        model = await asyncio.to_thread(self._resolve_model)
        args = vllm.AsyncEngineArgs(model=model, **self.engine_args)
        # AsyncLLM starts its output loop on the event loop at the first request.
        engine = await asyncio.to_thread(vllm.AsyncLLMEngine.from_engine_args, args)
        tokenizer = engine.get_tokenizer()
        if inspect.isawaitable(tokenizer):  # vLLM before V1 returned a coroutine
            tokenizer = await tokenizer
        return VLLMRuntime(
            AsyncEngineRows(engine, tokenizer),
            vllm.SamplingParams,
            top_logprobs=self._top_logprobs,
            structured=guided_decoding(),
        )

    def _resolve_model(self) -> str:
        from judges.backends.convert import resolve_model_dir

        ref = self._model_ref
        if ref is None or Path(ref).expanduser().exists():
            path = resolve_model_dir(ref, self._cache_dir)
            self._model_name = path.name
            return str(path)
        self._model_name = str(ref)
        return str(ref)

    async def _ready(self) -> VLLMRuntime:
        if self._runtime is None:
            await self.start()
        assert self._runtime is not None
        return self._runtime

    async def _call(
        self, work: Awaitable[list[R]], count: int, failed: Callable[[ItemStatus, str], R]
    ) -> list[R]:
        try:
            return await asyncio.wait_for(work, self._timeout_s)
        except TimeoutError:
            return [failed("timeout", f"no answer within {self._timeout_s}s")] * count
        except Exception as exc:  # the runtime isolates items; this is a last resort
            logger.exception("vLLM batch failed")
            return [failed("error", f"{type(exc).__name__}: {exc}")] * count
