"""The scripted judge of the service tests: tests.judges.scripted_backend with a fixed script.

It prefers the response containing "GOOD", can favour the first slot, and fails on purpose
for prompts containing "FAIL" (error), "SLOW" (timeout) or "TOOLONG" (invalid), or
everywhere when ``down``. Asked for a JSON schema, it replies with a JSON verdict (cut short
for "UNCLEAR"). For tests of parsing and aggregation only, never the only proof
that a feature works.
"""

from __future__ import annotations

import json
import math
import re

from judges.backends.base import ChoiceRequest, GenerateRequest
from tests.judges.scripted_backend import ScriptedBackend as LibraryScriptedBackend
from tests.judges.scripted_backend import ScriptedFailure

# Both fence styles: <response_a> (version 1 templates) and <<response_a CODE>> (version 2).
_SLOT = re.compile(
    r"<{1,2}response_a(?: \w+)?>{1,2}\n(.*?)\n<{1,2}/response_a"
    r".*?<{1,2}response_b(?: \w+)?>{1,2}\n(.*?)\n<{1,2}/response_b",
    re.S,
)


class ScriptedBackend(LibraryScriptedBackend):
    def __init__(self, first_slot_bias: float = 0.0, down: bool = False) -> None:
        super().__init__(
            choose=self._choose_script, reply=self._reply_script, model_id="scripted-judge"
        )
        self.first_slot_bias = first_slot_bias
        self.down = down

    def _p_first(self, text: str) -> float:
        match = _SLOT.search(text)
        if not match:
            return 0.5
        first, second = match.groups()
        base = 0.5 + 0.4 * (("GOOD" in first) - ("GOOD" in second))
        return min(0.99, max(0.01, base + self.first_slot_bias))

    def _check(self, text: str) -> None:
        if self.down:
            raise ScriptedFailure("error", "backend is down")
        if "FAIL" in text:
            raise ScriptedFailure("error", "scripted failure")
        if "SLOW" in text:
            raise ScriptedFailure("timeout", "scripted timeout")
        if "TOOLONG" in text:
            raise ScriptedFailure("invalid", "prompt too long (scripted)")

    def _choose_script(self, request: ChoiceRequest) -> list[float]:
        text = "\n".join(m["content"] for m in request.messages)
        self._check(text)
        if len(request.candidates) == 2 and request.candidates[0] != "1":  # A/B or slot labels
            p = self._p_first(text)
            return [math.log(p), math.log(1 - p)]
        level = 4 if "GOOD" in text else 2
        return [0.0 if i + 1 == level else -3.0 for i in range(len(request.candidates))]

    def _reply_script(self, request: GenerateRequest) -> str:
        text = "\n".join(m["content"] for m in request.messages)
        self._check(text)
        letter = "A" if self._p_first(text) > 0.5 else "B"
        if request.json_schema is not None:  # a JSON reply; UNCLEAR: cut before the verdict
            if "UNCLEAR" in text:
                return '{"analysis": "Both have merits.'
            return json.dumps({"analysis": "Reasoning...", "verdict": letter})
        if "UNCLEAR" in text:
            return "Both have merits."
        return f"Reasoning... [[{letter}]]"
