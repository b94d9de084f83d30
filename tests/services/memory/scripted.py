"""A scripted analyst/editor (a GenerateFn) for the applied and held paths of revision.

Never the only proof: tests/services/memory/test_memory_api.py runs the embedded SmolLM2 as analyst
and editor too. The editor answers the operations queued in ``edits`` (one list per call,
the last list repeated); the analyst answers a fixed analysis.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from judges.backends.base import GenerateRequest, GenerateResult


class ScriptedLLM:
    def __init__(self, edits: Sequence[list[dict[str, Any]]]) -> None:
        self.edits = list(edits)
        self.editor_calls = 0
        self.analyst_calls = 0
        self.prompts: list[str] = []

    async def __call__(self, requests: Sequence[GenerateRequest]) -> list[GenerateResult]:
        return [self._answer(r) for r in requests]

    def _answer(self, request: GenerateRequest) -> GenerateResult:
        schema = request.json_schema or {}
        if "operations" in schema.get("properties", {}):
            index = min(self.editor_calls, len(self.edits) - 1)
            self.editor_calls += 1
            self.prompts.append(request.messages[-1]["content"])
            body = {"operations": self.edits[index], "rationale": f"scripted edit {index}"}
        else:
            self.analyst_calls += 1
            body = {"went_right": "on topic", "went_wrong": "too long", "hacking": False}
        return GenerateResult("ok", json.dumps(body))
