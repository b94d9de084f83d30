"""A scripted generator for synthesis plumbing tests: deterministic JSON from the document.

For a synthesis prompt (its schema asks for ``reference_answer``) it answers with a question
about the document's opening words, the document's first two sentences as the reference
answer, three required criteria that each end with a distinct long word of that answer (so
the scripted judge of :mod:`tests.rubrics.scripted` finds them met by the reference answer
and, mostly, not by another document's answer) and one pitfall. A document containing
``GARBLED`` gets a reply that is not JSON (a stage 3 rejection). Judge prompts are answered by
:class:`RubricScriptedBackend`. The real-model test is tests/rubrics/test_synthesis_real.py.
"""

from __future__ import annotations

import json
import re

from judges.backends.base import GenerateRequest
from tests.rubrics.scripted import RubricScriptedBackend

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
        schema = request.json_schema or {}
        if "reference_answer" not in schema.get("properties", {}):
            return super()._reply(request)
        match = _DOCUMENT.search(request.messages[-1]["content"])
        document = match.group(1) if match else ""
        if "GARBLED" in document:
            return "Here is a question: what is it?"
        return json.dumps(scripted_instance(document))
