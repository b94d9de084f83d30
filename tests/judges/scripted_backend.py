"""A deterministic backend driven by plain functions, for unit tests of service logic.

It is the contract without a model: it validates requests the way real backends do and
turns any exception raised by a script into that item's ``error`` status. Real-model
tests use :class:`judges.backends.local.LocalBackend`; this one is for pure logic
(aggregation, order swaps, error paths) where a chosen reply must come back.

Example::

    backend = ScriptedBackend(choose=lambda req: [-0.1, -2.3])  # always prefers "A"
    [res] = await backend.score_choices([ChoiceRequest([user("?")], ["A", "B"])])
    assert res.best() == "A"
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from judges.backends.base import (
    BackendInfo,
    ChoiceRequest,
    ChoiceResult,
    GeneratedText,
    GenerateRequest,
    GenerateResult,
    ItemStatus,
    validate_choice,
    validate_generate,
)
from judges.lifecycle import READY, Readiness

ChooseScript = Callable[[ChoiceRequest], Sequence[float]]
GenerateScript = Callable[[GenerateRequest], str]


class ScriptedFailure(Exception):
    """Raised by a script to give its item a chosen status (``timeout``, ``error``, ...)."""

    def __init__(self, status: ItemStatus, message: str) -> None:
        super().__init__(message)
        self.status: ItemStatus = status


def uniform_choice(request: ChoiceRequest) -> list[float]:
    """Equal log-probability for every candidate (the default script)."""
    return [0.0] * len(request.candidates)


def echo_reply(request: GenerateRequest) -> str:
    """Reply with the last message's content (the default script)."""
    return request.messages[-1]["content"]


class ScriptedBackend:
    """A :class:`~judges.backends.base.JudgeBackend` whose answers come from functions.

    ``choose`` returns one log-probability per candidate; ``reply`` returns the generated
    text (cut at the first ``stop`` string, then to ``max_new_tokens`` whitespace-separated
    words), called once per sample when ``n > 1``; a ``json_schema`` is not enforced. A
    script that raises :class:`ScriptedFailure` gives its item that status; any other
    exception gives ``error``. ``calls`` records every request batch, so a test can check
    what the service sent; with ``delay`` set, each call sleeps that long and
    ``max_in_flight`` records how many calls overlapped.
    """

    def __init__(
        self,
        choose: ChooseScript = uniform_choice,
        reply: GenerateScript = echo_reply,
        model_id: str = "scripted",
    ) -> None:
        self._choose = choose
        self._reply = reply
        self._model_id = model_id
        self.calls: list[list[ChoiceRequest] | list[GenerateRequest]] = []
        self.delay = 0.0
        self.in_flight = 0
        self.max_in_flight = 0
        self._closed = False

    @property
    def info(self) -> BackendInfo:
        """Backend name ``scripted`` and the given model id."""
        return BackendInfo(name="scripted", model_id=self._model_id)

    @property
    def readiness(self) -> Readiness:
        """Always ready until closed: there is nothing to load."""
        return Readiness("closed") if self._closed else READY

    async def start(self) -> None:
        """Nothing to load."""

    async def aclose(self) -> None:
        """Nothing to release; readiness says ``closed`` afterwards."""
        self._closed = True

    async def score_choices(self, requests: Sequence[ChoiceRequest]) -> list[ChoiceResult]:
        """Score each request with the ``choose`` script."""
        self.calls.append(list(requests))
        await self._wait()
        return [self._score(request) for request in requests]

    async def generate(self, requests: Sequence[GenerateRequest]) -> list[GenerateResult]:
        """Answer each request with the ``reply`` script."""
        self.calls.append(list(requests))
        await self._wait()
        return [self._generate(request) for request in requests]

    async def _wait(self) -> None:
        if not self.delay:
            return
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.delay)
        finally:
            self.in_flight -= 1

    def _score(self, request: ChoiceRequest) -> ChoiceResult:
        problem = validate_choice(request)
        if problem:
            return ChoiceResult.failed("invalid", problem)
        try:
            logprobs = list(self._choose(request))
        except ScriptedFailure as exc:
            return ChoiceResult.failed(exc.status, str(exc))
        except Exception as exc:
            return ChoiceResult.failed("error", f"{type(exc).__name__}: {exc}")
        if len(logprobs) != len(request.candidates):
            return ChoiceResult.failed("error", "script returned the wrong number of scores")
        return ChoiceResult.from_logprobs(request.candidates, logprobs)

    def _generate(self, request: GenerateRequest) -> GenerateResult:
        problem = validate_generate(request)
        if problem:
            return GenerateResult.failed("invalid", problem)
        samples = []
        for _ in range(request.n):  # the script runs once per sample
            try:
                text = self._reply(request)
            except ScriptedFailure as exc:
                return GenerateResult.failed(exc.status, str(exc))
            except Exception as exc:
                return GenerateResult.failed("error", f"{type(exc).__name__}: {exc}")
            samples.append(_as_sample(text, request))
        return GenerateResult.of(samples)


def _as_sample(text: str, request: GenerateRequest) -> GeneratedText:
    """The script's text cut at the first stop string, then at ``max_new_tokens`` words.

    The schema is not enforced here (the script decides what comes back), so a test can
    send a reply that does not validate, as a server that ignores schemas would.
    """
    cuts = [i for i in (text.find(s) for s in request.stop) if i >= 0]
    if cuts:
        text = text[: min(cuts)]
    words = text.split(" ")
    truncated = len(words) > request.max_new_tokens
    return GeneratedText(
        " ".join(words[: request.max_new_tokens]),
        min(len(words), request.max_new_tokens),
        "length" if truncated else "stop",
    )
