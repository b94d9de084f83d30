"""Generate mode under a JSON schema: the judge asks for ``{"analysis", "verdict"}``.

Templates whose ``parser`` is ``"json"`` (``pairwise_json@2``, the generate-mode default)
are answered through :mod:`judges.generation` with :func:`verdict_schema`, so the backend
enforces the shape while decoding (or, for a server that ignores the schema, the reply is
validated and an invalid one is kept as an ``unparseable`` order with its text).

The analysis is bounded in characters so that the whole object fits in the order's token
budget: ``ANALYSIS_CHARS_PER_TOKEN`` characters per token left after the JSON's own
``JSON_OVERHEAD_TOKENS`` (SmolLM2's tokenizer averages about 4 characters a token on
English, so 3 leaves room for harder text).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from judges.generation import GenerateFn, GenerationRequest, Sampling, generate
from judges.templates import RenderedPrompt
from services.judge import orders as order_logic

JSON_PARSER = "json"
VERDICTS = ("A", "B", "tie")
ANALYSIS_CHARS_PER_TOKEN = 3
JSON_OVERHEAD_TOKENS = 16


def verdict_schema(max_new_tokens: int) -> dict[str, Any]:
    """The reply's JSON schema, with the analysis bounded to fit ``max_new_tokens``.

    >>> verdict_schema(96)["properties"]["analysis"]["maxLength"]
    240
    """
    analysis_chars = max(0, (max_new_tokens - JSON_OVERHEAD_TOKENS) * ANALYSIS_CHARS_PER_TOKEN)
    return {
        "type": "object",
        "properties": {
            "analysis": {"type": "string", "maxLength": analysis_chars},
            "verdict": {"type": "string", "enum": list(VERDICTS)},
        },
        "required": ["analysis", "verdict"],
        "additionalProperties": False,
    }


async def judge_structured(
    call: GenerateFn,
    prompts: Sequence[RenderedPrompt],
    orders: Sequence[order_logic.Order],
    max_new_tokens: int,
) -> list[order_logic.OrderJudgment]:
    """Every prompt answered as a JSON verdict, in one batched backend call."""
    schema = verdict_schema(max_new_tokens)
    requests = [
        GenerationRequest(p.messages, Sampling(max_new_tokens=max_new_tokens), schema=schema)
        for p in prompts
    ]
    results = await generate(call, requests)
    return [
        order_logic.from_structured(order, result)
        for order, result in zip(orders, results, strict=True)
    ]
