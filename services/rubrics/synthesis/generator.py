"""Stage 3: question, reference answer and rubric generated together, in ONE structured call
per document (ARES generates the three jointly, conditioned on a domain and a persona).

The reply must follow :data:`CANDIDATE_SCHEMA`: the backend enforces it while decoding
(xgrammar in the local backend, ``response_format`` on an OpenAI-compatible server, guided
decoding in vLLM) and :func:`judges.generation.generate` validates it again. The generator is
the judge's backend: the embedded SmolLM2-135M by default, any OpenAI-compatible server with
``PLAUDIT_JUDGE_BACKEND=openai`` (see README, Rubric synthesis).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from judges.backends.base import ChatMessage
from judges.generation import GenerateFn, GenerationRequest, GenerationResult, Sampling, generate

#: The schema's bounds keep a whole instance within about 500 tokens (SmolLM2's tokenizer
#: averages about 4 characters a token): 200 + 400 characters of question and answer, at most
#: 8 criteria of 120 characters, plus the JSON around them.
#: Characters of the document shown to the generator (the rest is cut at a word).
DOCUMENT_CHARS = 2000
CANDIDATE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "question": {"type": "string", "minLength": 10, "maxLength": 200},
        "reference_answer": {"type": "string", "minLength": 10, "maxLength": 400},
        "criteria": {
            "type": "array",
            "minItems": 1,
            "maxItems": 8,
            "items": {
                "type": "object",
                "properties": {
                    "text": {"type": "string", "minLength": 5, "maxLength": 120},
                    "weight": {"type": "integer", "minimum": 1, "maximum": 10},
                    "kind": {"type": "string", "enum": ["required", "pitfall"]},
                },
                "required": ["text", "weight", "kind"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["question", "reference_answer", "criteria"],
    "additionalProperties": False,
}

SYSTEM = (
    "You write one exam question with a reference answer and a grading rubric from a "
    "document. You reply with one JSON object and nothing else."
)
USER = """\
Domain: {domain}
Write for this reader: {persona}

<document>
{document}
</document>

From the document above, write:
- "question": one question this reader might ask. It must make sense on its own: do not \
mention the document, the passage or the text, and do not give the answer away.
- "reference_answer": a correct answer in one to three sentences, using only facts stated \
in the document.
- "criteria": 4 to 8 criteria to grade answers to the question. Each has "text" (one \
statement a grader can check), "weight" (1 to 10: more important, higher) and "kind": \
"required" for something a good answer does, "pitfall" for a mistake a poor answer makes. \
Include one or two pitfalls.

Reply with the JSON object only."""


@dataclass(frozen=True)
class CriterionDraft:
    text: str
    weight: float
    kind: Literal["required", "pitfall"]


@dataclass(frozen=True)
class Candidate:
    """A generated instance before validation."""

    question: str
    reference_answer: str
    criteria: tuple[CriterionDraft, ...]

    def as_dict(self) -> dict[str, Any]:
        return {
            "question": self.question,
            "reference_answer": self.reference_answer,
            "criteria": [
                {"text": c.text, "weight": c.weight, "kind": c.kind} for c in self.criteria
            ],
        }

    @classmethod
    def from_dict(cls, value: dict[str, Any]) -> Candidate:
        return cls(
            question=str(value["question"]).strip(),
            reference_answer=str(value["reference_answer"]).strip(),
            criteria=tuple(
                CriterionDraft(str(c["text"]).strip(), float(c["weight"]), c["kind"])
                for c in value["criteria"]
            ),
        )


@dataclass(frozen=True)
class Drafted:
    """One document's generation: a candidate, or why there is none (and the raw reply)."""

    candidate: Candidate | None
    reason: str | None = None
    raw: str | None = None


@dataclass(frozen=True)
class Brief:
    """What the generator is told about one document."""

    document_id: str
    text: str
    domain: str
    persona: str


def messages(brief: Brief) -> list[ChatMessage]:
    document = _cut(brief.text, DOCUMENT_CHARS)
    user = USER.format(domain=brief.domain, persona=brief.persona, document=document)
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


async def draft(
    call: GenerateFn,
    briefs: Sequence[Brief],
    *,
    max_new_tokens: int,
    temperature: float,
    seed: int,
) -> list[Drafted]:
    """One structured call per document, sent together as one batched backend call."""
    requests = [
        GenerationRequest(
            messages(b),
            Sampling(
                temperature=temperature,
                max_new_tokens=max_new_tokens,
                seed=_seed(seed, b.document_id) if temperature > 0 else None,
            ),
            schema=CANDIDATE_SCHEMA,
        )
        for b in briefs
    ]
    return [_drafted(result) for result in await generate(call, requests)]


def _drafted(result: GenerationResult) -> Drafted:
    if not result.ok:
        return Drafted(None, f"backend_{result.status}: {result.error or ''}".strip())
    sample = result.samples[0]
    if not sample.ok:
        return Drafted(None, f"invalid_output: {sample.error}", sample.text)
    return Drafted(Candidate.from_dict(sample.value), None, sample.text)


def _seed(seed: int, document_id: str) -> int:
    digest = hashlib.sha256(f"{seed}:{document_id}".encode()).digest()
    return int.from_bytes(digest[:4], "big")


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit].rsplit(" ", 1)[0] + " ..."
