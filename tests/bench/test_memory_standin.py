"""The stand-in analyst and editor of the production-shape overhead benchmark (issue 24): over
real HTTP through the memory's OpenAI-compatible generation path, their JSON validates against
the memory's schemas and the editor's operation passes the memory's parser."""

from __future__ import annotations

from judges.backends.base import user
from judges.backends.openai_backend import OpenAIBackend, OpenAIConfig
from judges.generation import GenerationRequest, Sampling, generate
from plaudit_wire.rubrics import Criterion
from services.memory.llm import _operation
from services.memory.prompts import ANALYSIS_SCHEMA, EDIT_SCHEMA, editor_messages
from tests.judges.openai_standin import MODEL, stand_in_server

CRITERIA = [
    Criterion(
        id="c1", text="Names the place that is described", weight=2, anchor=True, kind="required"
    ),
    Criterion(
        id="c2",
        text="Mentions at least one sound of the place",
        weight=1,
        kind="required",
        anchor=False,
    ),
]


async def test_the_stand_in_answers_the_memory_schemas_after_a_delay() -> None:
    with stand_in_server() as standin:
        backend = OpenAIBackend(OpenAIConfig(standin.url("memory", "t"), MODEL))
        requests = [
            GenerationRequest([user("Analyse this rollout.")], Sampling(), schema=ANALYSIS_SCHEMA),
            GenerationRequest(
                editor_messages(CRITERIA, "c2 saturated", []), Sampling(), schema=EDIT_SCHEMA
            ),
        ]
        analysis, edit = await generate(backend.generate, requests)
        await backend.aclose()
    assert analysis.ok and analysis.samples[0].value["hacking"] is False
    [operation] = [_operation(item) for item in edit.samples[0].value["operations"]]
    assert (operation.op, operation.id) == ("reword", "c2")  # the anchor c1 is left alone
    assert len(standin.run("t").bodies) == 2
