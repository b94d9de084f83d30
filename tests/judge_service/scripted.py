"""A scripted judge backend for tests of parsing and aggregation (never the only proof).

It prefers the response containing "GOOD", can favour the first slot, and can fail on purpose
for prompts containing "FAIL" (error) or "SLOW" (timeout).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence

from judges.backends.base import (
    BackendInfo,
    ChoiceRequest,
    ChoiceResult,
    GenerateRequest,
    GenerateResult,
)

_SLOT = re.compile(r"<response_a>\n(.*?)\n</response_a>.*?<response_b>\n(.*?)\n</response_b>", re.S)


class ScriptedBackend:
    def __init__(self, first_slot_bias: float = 0.0, down: bool = False) -> None:
        self.first_slot_bias = first_slot_bias
        self.down = down
        self.delay = 0.0
        self.calls: list[int] = []
        self.in_flight = 0
        self.max_in_flight = 0

    @property
    def info(self) -> BackendInfo:
        return BackendInfo(name="scripted", model_id="scripted-judge")

    def _p_first(self, text: str) -> float:
        match = _SLOT.search(text)
        if not match:
            return 0.5
        first, second = match.groups()
        base = 0.5 + 0.4 * (("GOOD" in first) - ("GOOD" in second))
        return min(0.99, max(0.01, base + self.first_slot_bias))

    def _failure(self, text: str) -> ChoiceResult | None:
        if self.down:
            return ChoiceResult.failed("error", "backend is down")
        if "FAIL" in text:
            return ChoiceResult.failed("error", "scripted failure")
        if "SLOW" in text:
            return ChoiceResult.failed("timeout", "scripted timeout")
        return None

    async def score_choices(self, requests: Sequence[ChoiceRequest]) -> list[ChoiceResult]:
        self.calls.append(len(requests))
        if self.delay:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            await asyncio.sleep(self.delay)
            self.in_flight -= 1
        out = []
        for r in requests:
            text = "\n".join(m["content"] for m in r.messages)
            failure = self._failure(text)
            if failure is not None:
                out.append(failure)
            elif list(r.candidates) == ["A", "B"]:
                p = self._p_first(text)
                out.append(ChoiceResult.from_logprobs(["A", "B"], [_log(p), _log(1 - p)]))
            else:
                level = 4 if "GOOD" in text else 2
                lps = [0.0 if i + 1 == level else -3.0 for i in range(len(r.candidates))]
                out.append(ChoiceResult.from_logprobs(list(r.candidates), lps))
        return out

    async def generate(self, requests: Sequence[GenerateRequest]) -> list[GenerateResult]:
        self.calls.append(len(requests))
        out = []
        for r in requests:
            text = "\n".join(m["content"] for m in r.messages)
            failure = self._failure(text)
            if failure is not None:
                out.append(GenerateResult.failed(failure.status, failure.error or ""))
            elif "UNCLEAR" in text:
                out.append(GenerateResult("ok", "Both have merits.", 4, "stop"))
            else:
                letter = "A" if self._p_first(text) > 0.5 else "B"
                out.append(GenerateResult("ok", f"Reasoning... [[{letter}]]", 6, "stop"))
        return out


def _log(p: float) -> float:
    import math

    return math.log(p)
