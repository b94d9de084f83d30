"""The trainer protocols' settings section (``PLAUDIT_PROTOCOLS_<FIELD>``)."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field

from services.core.settings import Section


class ProtocolsSettings(Section):
    """How ``/get_reward`` (OpenRLHF) and ``/slime/reward`` (slime) score by default."""

    section_name: ClassVar[str] = "protocols"

    spec: dict[str, Any] | None = Field(
        default=None,
        description="the reward spec as JSON; default "
        '{"channels": {"judge_scale": {"weight": 1.0}}}',
    )
    group_size: int | None = Field(
        default=None,
        ge=1,
        le=1024,
        description="samples per prompt (OpenRLHF --n_samples_per_prompt, slime "
        "--n-samples-per-prompt); group channels wait for this many",
    )
    group_wait_s: float = Field(
        default=60.0,
        gt=0,
        le=600,
        description="the longest a partial group waits before it is scored (keep it under the "
        "trainer's HTTP timeout: OpenRLHF 180 s, slime 120 s)",
    )
    eval_group_size: int | None = Field(
        default=None,
        ge=1,
        le=1024,
        description="samples per prompt of the trainer's evaluation, which comes through the "
        "same URL (OpenRLHF --eval.n_samples_per_prompt, 4 by default; slime "
        "--n-samples-per-eval-prompt): a group holding exactly this many, with no new sample "
        "for settle_s, is scored then instead of waiting out group_wait_s",
    )
    settle_s: float = Field(
        default=10.0,
        gt=0,
        le=600,
        description="how long an evaluation-sized group waits for another sample before it is "
        "scored (a training group pausing that long at exactly eval_group_size samples is "
        "scored in two parts)",
    )
    on_failure: Literal["neutral", "error"] = Field(
        default="neutral",
        description="a failed sample gets its group's mean ok total (neutral, flagged in the "
        "response) or the request answers 503 (error)",
    )
    unwrap_templates: bool = Field(
        default=True,
        description="turn chat-templated prompt text (ChatML, Llama 3, Gemma, Mistral, Phi) "
        "back into the conversation before the judge sees it",
    )
    keep_system_prompt: bool = Field(
        default=False,
        description="keep the policy's system prompt when unwrapping a templated prompt",
    )
    shared_buffer: bool = Field(
        default=True,
        description="with PLAUDIT_REDIS_URL set, gather each prompt's samples on Redis, so "
        "replicas behind a load balancer complete the same groups",
    )
