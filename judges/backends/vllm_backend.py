"""A judge backend that runs vLLM in this process, for a GPU box.

``vllm`` is imported only when the engine loads (:meth:`VLLMBackend.start`). The engine
has ``enable_prefix_caching=True``: judge prompts share long system prompts and rubrics.
Engine calls run on one dedicated worker thread (``vllm.LLM`` is not thread-safe), never
on the event loop; the items of a call go to the engine in one ``generate``. Building the
engine off the main thread needs vLLM >= 0.10.2 (vllm-project/vllm#23298).

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
import functools
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

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
from judges.lifecycle import Readiness, State

logger = logging.getLogger(__name__)

BACKEND_NAME = "vllm"
T = TypeVar("T")
R = TypeVar("R", ChoiceResult, GenerateResult)


@dataclass(frozen=True, slots=True)
class _Row:
    owner: int  # the index of the request it serves; ``target``: the scored tail of ``ids``
    ids: list[int]
    target: list[int]


class VLLMRuntime:
    """Blocking choice scoring and generation on a ``vllm.LLM`` (call from one thread).

    ``sampling_params`` is ``vllm.SamplingParams`` (injectable so the plumbing can be
    tested without a GPU); ``structured`` names the ``SamplingParams`` field for guided
    decoding and its parameter class (see :func:`guided_decoding`).
    """

    def __init__(
        self,
        llm: Any,
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

    def score_choices(self, requests: Sequence[ChoiceRequest]) -> list[ChoiceResult]:
        """Score every request; never raises for a single item."""
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
        for row, result in self._run(
            next_rows, self._next_token_params(), results, ChoiceResult.failed
        ):
            choice = self._from_next_token(requests[row.owner].candidates, result)
            if choice is None:  # a candidate is outside the top list: score it exactly
                forced.extend(self._forced_rows(row.owner, row.ids, requests[row.owner]))
            else:
                results[row.owner] = choice
        self._score_forced(requests, forced, results)
        return [r or ChoiceResult.failed("error", "not scored") for r in results]

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
        if _has_prefix_pair(tokenized):
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

    def _score_forced(
        self,
        requests: Sequence[ChoiceRequest],
        rows: list[_Row],
        results: list[ChoiceResult | None],
    ) -> None:
        params = self.sampling_params(max_tokens=1, temperature=0.0, prompt_logprobs=1)
        sums: dict[int, list[float]] = {}
        for row, output in self._run(rows, params, results, ChoiceResult.failed):
            positions = output.prompt_logprobs[len(row.ids) - len(row.target) :]
            picked = zip(positions, row.target, strict=True)
            sums.setdefault(row.owner, []).append(sum(float(p[t].logprob) for p, t in picked))
        for owner, values in sums.items():
            if results[owner] is None and len(values) == len(requests[owner].candidates):
                results[owner] = ChoiceResult.from_logprobs(requests[owner].candidates, values)

    def generate(self, requests: Sequence[GenerateRequest]) -> list[GenerateResult]:
        """Generate for every request in one engine call; never raises for a single item."""
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
        for row, output in self._run(rows, params, results, GenerateResult.failed):
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

    def _run(
        self,
        rows: list[_Row],
        params: Any,
        results: list[R | None],
        failed: Callable[[ItemStatus, str], R],
    ) -> list[tuple[_Row, Any]]:
        """One engine call for ``rows``; if it fails, their owners get ``error`` results."""
        if not rows:
            return []
        prompts = [{"prompt_token_ids": row.ids} for row in rows]
        try:
            outputs = self.llm.generate(prompts, params, use_tqdm=False)
        except Exception as exc:
            logger.exception("vLLM call with %d prompts failed", len(rows))
            for row in rows:
                results[row.owner] = failed("error", f"{type(exc).__name__}: {exc}")
            return []
        return list(zip(rows, outputs, strict=True))


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


def _has_prefix_pair(tokenized: list[list[int]]) -> bool:
    return any(len(a) < len(b) and b[: len(a)] == a for a in tokenized for b in tokenized)


def _engine_max_len(llm: Any) -> int:
    for owner in (getattr(llm, "llm_engine", None), llm):
        config = getattr(owner, "model_config", None)
        if config is not None and getattr(config, "max_model_len", None):
            return int(config.max_model_len)
    return 1 << 30


class VLLMBackend:
    """:class:`~judges.backends.base.JudgeBackend` over an in-process ``vllm.LLM``.

    ``model`` is a local HF directory, a ``.gguf`` file or None (both resolved and, for
    GGUF, converted once into ``cache_dir`` by :mod:`judges.backends.convert`; None is the
    bundled SmolLM2), or a hub id passed to vLLM as is. ``engine_kwargs`` go to
    ``vllm.LLM`` (``tensor_parallel_size``, ``quantization``, ...). ``timeout_s`` bounds
    each call: items not back by then are ``timeout`` (the engine call itself runs on, and
    the next call waits for it). Construction is cheap; :meth:`start` loads the engine.
    """

    def __init__(
        self,
        model: str | os.PathLike[str] | None = None,
        *,
        cache_dir: Path | None = None,
        dtype: str = "auto",
        gpu_memory_utilization: float = 0.85,
        max_model_len: int | None = None,
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
            "max_logprobs": top_logprobs,
            "enable_prefix_caching": True,
            **(engine_kwargs or {}),
        }
        self._top_logprobs = top_logprobs
        self._timeout_s = timeout_s
        self._runtime: VLLMRuntime | None = None
        self._model_name: str | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._start_lock = asyncio.Lock()
        self._state: State = "idle"
        self._start_error: str | None = None

    @property
    def info(self) -> BackendInfo:
        """Backend name and model id (the model directory's name, or the hub id)."""
        name = self._model_name or (
            "SmolLM2-135M-Instruct" if self._model_ref is None else Path(self._model_ref).name
        )
        details = {k: str(v) for k, v in self._engine_kwargs.items() if v is not None}
        details["choice_scoring"] = "sequence"  # multi-token candidates are teacher-forced
        return BackendInfo(name=BACKEND_NAME, model_id=name, details=details)

    async def start(self) -> None:
        """Resolve the model and build the engine on the worker thread. Idempotent."""
        async with self._start_lock:
            if self._runtime is not None:
                return
            if self._executor is None:
                self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="vllm")
            started = time.monotonic()
            self._state, self._start_error = "loading", None
            try:
                self._runtime = await self._in_worker(self._load)
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
        """Drop the engine and stop the worker thread."""
        executor, self._executor = self._executor, None
        self._runtime = None
        self._state = "closed"
        if executor is not None:
            await asyncio.get_running_loop().run_in_executor(
                None, functools.partial(executor.shutdown, wait=True)
            )

    async def __aenter__(self) -> VLLMBackend:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def score_choices(self, requests: Sequence[ChoiceRequest]) -> list[ChoiceResult]:
        """Score every request in at most two engine calls."""
        if not requests:
            return []
        runtime = await self._ready()
        work = functools.partial(runtime.score_choices, list(requests))
        return await self._call(work, len(requests), ChoiceResult.failed)

    async def generate(self, requests: Sequence[GenerateRequest]) -> list[GenerateResult]:
        """Generate every reply in one engine call."""
        if not requests:
            return []
        runtime = await self._ready()
        work = functools.partial(runtime.generate, list(requests))
        return await self._call(work, len(requests), GenerateResult.failed)

    def _load(self) -> VLLMRuntime:
        import vllm

        model = self._resolve_model()
        kwargs = {k: v for k, v in self._engine_kwargs.items() if v is not None}
        llm = vllm.LLM(model=model, **kwargs)
        return VLLMRuntime(
            llm,
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
        self, work: Callable[[], list[R]], count: int, failed: Callable[[ItemStatus, str], R]
    ) -> list[R]:
        try:
            return await asyncio.wait_for(self._in_worker(work), self._timeout_s)
        except TimeoutError:
            return [failed("timeout", f"no answer within {self._timeout_s}s")] * count
        except Exception as exc:  # the runtime isolates items; this is a last resort
            logger.exception("vLLM batch failed")
            return [failed("error", f"{type(exc).__name__}: {exc}")] * count

    async def _in_worker(self, fn: Callable[[], T]) -> T:
        if self._executor is None:
            raise RuntimeError("backend is closed")
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn)
