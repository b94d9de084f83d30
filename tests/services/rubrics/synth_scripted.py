"""A scripted generator for synthesis plumbing tests: deterministic JSON from the document.

For a synthesis prompt (its schema asks for ``reference_answer``) it answers with a question
about the document's opening words, the document's first two sentences as the reference
answer, three required criteria that each end with a distinct long word of that answer (so
the scripted judge of :mod:`tests.services.rubrics.scripted` finds them met by the reference answer
and, mostly, not by another document's answer) and one pitfall. A document containing
``GARBLED`` gets a reply that is not JSON (a stage 3 rejection). Judge prompts are answered by
:class:`RubricScriptedBackend`. The real-model test is
tests/services/rubrics/test_synthesis_real.py.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from judges.backends.base import GenerateRequest, GenerateResult
from services.judge.settings import JudgeSettings
from tests.services.rubrics.scripted import RubricScriptedBackend

_DOCUMENT = re.compile(r"<document>\n(.*?)\n</document>", re.S)


def scripted_instance(document: str) -> dict[str, object]:
    sentences = re.split(r"(?<=[.!?])\s+", document.strip())
    answer = " ".join(sentences[:2])
    words: list[str] = []
    for word in re.findall(r"[A-Za-z]{7,}", answer):
        if word.lower() not in {w.lower() for w in words}:
            words.append(word)
    opening = " ".join(document.split()[:3]).rstrip(".,;:")
    forms = ("Mentions {}", "Explains the role of {}", "Refers correctly to {}")
    criteria: list[dict[str, object]] = [
        {"text": form.format(word.lower()), "weight": 3 + i, "kind": "required"}
        for i, (form, word) in enumerate(zip(forms, words[:3], strict=False))
    ]
    criteria.append(
        {"text": "Makes up facts that are plainly fabricated", "weight": 2, "kind": "pitfall"}
    )
    return {
        "question": f"What should a curious reader know about {opening}?",
        "reference_answer": answer,
        "criteria": criteria,
    }


class SynthScriptedBackend(RubricScriptedBackend):
    def _reply(self, request: GenerateRequest) -> str:
        if not _is_synthesis(request):
            return super()._reply(request)
        match = _DOCUMENT.search(request.messages[-1]["content"])
        document = match.group(1) if match else ""
        if "GARBLED" in document:
            return "Here is a question: what is it?"
        return json.dumps(scripted_instance(document))


class ExtractiveRealJudge:
    """The deterministic generator for synthesis prompts in front of a real judge backend
    (the embedded SmolLM2 by default): stages 4 and 5 then run on real verdicts."""

    def __init__(self, inner: Any = None) -> None:
        if inner is None:
            from services.core.models.layer import model_backend
            from services.settings import Settings

            settings = Settings()
            inner = model_backend(settings, "judge", JudgeSettings.of(settings))
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def generate(self, requests: Sequence[GenerateRequest]) -> list[GenerateResult]:
        synth = [i for i, r in enumerate(requests) if _is_synthesis(r)]
        rest = [r for i, r in enumerate(requests) if i not in set(synth)]
        answered = iter(await self.inner.generate(rest) if rest else [])
        out = []
        for index, request in enumerate(requests):
            if index in synth:
                match = _DOCUMENT.search(request.messages[-1]["content"])
                text = json.dumps(scripted_instance(match.group(1) if match else ""))
                out.append(GenerateResult("ok", text=text, finish_reason="stop"))
            else:
                out.append(next(answered))
        return out


def _is_synthesis(request: GenerateRequest) -> bool:
    return "reference_answer" in (request.json_schema or {}).get("properties", {})
