"""Wire models of the trainer protocols: OpenRLHF's and slime's remote reward calls.

These follow the trainers' own formats, not Plaudit's: the request models *ignore* unknown
keys (unlike every other Plaudit request), because the trainers add fields between releases
and cannot be configured to leave them out.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from plaudit_wire.limits import Text
from plaudit_wire.schemas import Message

FailurePolicy = Literal["neutral", "error"]


class _TrainerModel(BaseModel):
    # Strict like every request model (no booleans as numbers, no coerced strings).
    model_config = ConfigDict(extra="ignore", strict=True, allow_inf_nan=False)


class OpenRLHFRequest(_TrainerModel):
    """What OpenRLHF posts to ``--remote_rm_url``: one entry per sample (usually just one).

    Example::

        {"query": ["<|user|>2+2?<|assistant|>4<|im_end|>"],
         "prompts": ["<|user|>2+2?<|assistant|>"], "labels": ["4"]}

    ``query`` is the decoded prompt + response; ``labels`` are accepted and not used.
    """

    # That the lists have one entry per query is checked by the service. An empty list is
    # valid: OpenRLHF sends one to every extra endpoint of --remote_rm_url.
    query: list[Text] = Field(default_factory=list, description="prompt + response, decoded")
    prompts: list[Text] = Field(default_factory=list, description="the prompt of each query")
    labels: list[Any] | None = Field(default=None, description="accepted, not used")


class OpenRLHFResponse(BaseModel):
    """What OpenRLHF reads: ``rewards``, ``scores`` (in [0, 1], for its dynamic filtering) and
    numeric ``extra_logs`` (one value per sample); ``statuses`` and ``spec_hash`` are extra."""

    rewards: list[float]
    scores: list[float]
    extra_logs: dict[str, list[float]]
    statuses: list[str]
    truncated: list[bool] = Field(
        description="the policy saw this sample's prompt cut from the left (OpenRLHF's prompt "
        "limit); the judge was shown the same cut prompt"
    )
    spec_hash: str


class SlimeMessage(_TrainerModel):
    role: Literal["system", "user", "assistant"]
    content: Text

    def message(self) -> Message:
        return Message(role=self.role, content=self.content)


class SlimeRequest(_TrainerModel):
    """What slime's ``remote_rm`` posts to ``--rm-url``: one sample.

    Example: ``{"prompt": "2+2?", "response": "4", "label": "4"}``.
    """

    prompt: Text | list[SlimeMessage]
    response: Text
    label: Any = Field(default=None, description="accepted, not used")


class SlimeResponse(BaseModel):
    """A dict for slime's ``--reward-key reward``; ``total`` is null when scoring failed."""

    reward: float
    score: float = Field(ge=0, le=1)
    total: float | None
    status: str
    failed: bool
    channels: dict[str, float]
    group_size: int
    spec_hash: str
