"""Simulator wire types (pydantic only): a turn, an episode, a calibration's options and
calibrations."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from plaudit_wire.names import NO_NUL_PATTERN, ArtifactName, ArtifactRefStr
from plaudit_wire.schemas import Message, Page, StrictModel

MAX_GOAL = 4000
TerminationReason = Literal["user_done", "max_turns", "policy_error", "simulator_error"]


class Sampling(StrictModel):
    """How the simulated user's message is sampled."""

    temperature: float = Field(default=0.8, ge=0, le=2, description="0: greedy")
    top_p: float = Field(default=1.0, gt=0, le=1)
    max_new_tokens: int | None = Field(
        default=None, ge=1, le=512, description="default: the server's simulator max_new_tokens"
    )
    seed: int | None = Field(default=None, ge=0, le=2**31 - 1, description="reproducible sample")


class SimulatorInput(Sampling):
    goal: str = Field(
        min_length=1, max_length=MAX_GOAL, description="the user's goal or persona, in words"
    )
    calibration: ArtifactRefStr | None = Field(
        default=None,
        description="'name@version' (or 'name': its current version) of a stored calibration; "
        "null: the uncalibrated, prompted simulator",
    )

    @field_validator("goal")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("goal must not be blank: describe what the user wants")
        return value


class TurnRequest(SimulatorInput):
    """``POST /v1/simulator/turn``: the dialogue so far (user and assistant messages, oldest
    first, ending with the assistant's; empty: the user opens the conversation)."""

    messages: list[Message] = Field(default_factory=list, max_length=1000)

    @field_validator("messages")
    @classmethod
    def _dialogue(cls, messages: list[Message]) -> list[Message]:
        for i, message in enumerate(messages):
            if message.role not in ("user", "assistant"):
                raise ValueError(
                    f"messages[{i}].role is {message.role!r}: a dialogue has only 'user' and "
                    "'assistant' messages (put the user's situation in 'goal')"
                )
        if messages and messages[-1].role != "assistant":
            raise ValueError(
                "the last message must be the assistant's: the simulator writes the user's "
                "answer to it"
            )
        return messages


class SatisfactionOut(BaseModel):
    """The user's satisfaction with the last assistant turn, 1 (very dissatisfied) to 5."""

    expected: float = Field(description="sum of level x probability")
    distribution: list[float] = Field(description="P(1), ..., P(5)")
    source: Literal["predictor", "prompted"] = Field(
        description="predictor: the calibration's fitted predictor; prompted: the simulator's "
        "model scoring the digits 1-5 (uncalibrated)"
    )


class UserMessage(BaseModel):
    role: Literal["user"] = "user"
    content: str


class TurnResponse(BaseModel):
    message: UserMessage
    done: bool = Field(description="the user ends the conversation with this message")
    done_reason: Literal["end_marker", "closing_phrase"] | None
    satisfaction: SatisfactionOut | None = Field(
        description="null at the opening (no assistant turn to rate) or when it failed"
    )
    satisfaction_error: str | None = None
    calibration: str | None = Field(description="'name@version' used, null: uncalibrated")
    model: str = Field(description="the simulator's language model")


class PolicySpec(StrictModel):
    """An OpenAI-compatible chat server playing the assistant."""

    base_url: str = Field(
        min_length=8,
        max_length=2000,
        pattern=r"^https?://[!-~]+$",
        description="with /v1 (printable ASCII: encode other characters)",
    )
    model: str = Field(min_length=1, max_length=200)
    api_key: str | None = Field(default=None, max_length=500, pattern=r"^[!-~]+$")
    system_prompt: str | None = Field(default=None, max_length=MAX_GOAL)
    temperature: float = Field(default=0.0, ge=0, le=2)
    max_tokens: int = Field(default=256, ge=1, le=4096)


class EpisodeRequest(SimulatorInput):
    """``POST /v1/simulator/episodes``: a whole dialogue against a policy server."""

    policy: PolicySpec
    max_turns: int = Field(default=8, ge=1, le=32, description="user turns at most")


class EpisodeTurn(BaseModel):
    """One exchange: the user's message and the policy's answer (none when it ended here)."""

    user: str
    assistant: str | None
    satisfaction: SatisfactionOut | None = Field(
        description="the user's satisfaction with the assistant turn before this user message"
    )


class EpisodeResponse(BaseModel):
    turns: list[EpisodeTurn]
    messages: list[dict[str, str]] = Field(description="the dialogue as chat messages")
    termination: TerminationReason
    done_reason: Literal["end_marker", "closing_phrase"] | None = Field(
        default=None,
        description="with termination user_done: how the user ended (end_marker: the "
        "simulator's end marker, which a calibration's act model decides; closing_phrase: a "
        "short goodbye)",
    )
    error: str | None = Field(default=None, description="why the policy or simulator failed")
    final_satisfaction: SatisfactionOut | None = Field(
        description="the user's satisfaction with the last assistant turn"
    )
    calibration: str | None
    model: str


#: The simulator's system prompt and goal take 94-105 SmolLM2 tokens on the USS domains, so a
#: shorter limit fits no example and the job failed late (issue 21).
MIN_MAX_LENGTH = 128


class CalibrationConfig(BaseModel):
    """Every option of a calibration (``POST /v1/simulator/calibrations``, the CLI)."""

    data: list[str] = Field(
        default_factory=lambda: ["sgd", "mwoz", "ccpe"],
        min_length=1,
        max_length=8,
        description="the shared USS sets (sgd, mwoz, ccpe) or USS-format files on the server",
    )
    max_steps: int = Field(default=40, ge=0, le=100_000, description="LoRA steps (0: no LoRA)")
    batch_size: int = Field(default=4, ge=1, le=256)
    learning_rate: float = Field(default=3e-4, gt=0, le=1)
    lora_rank: int = Field(default=8, ge=1, le=256)
    lora_alpha: int = Field(default=16, ge=1, le=1024)
    max_length: int = Field(
        default=256,
        ge=MIN_MAX_LENGTH,
        le=8192,
        description="tokens per example (the simulator's instructions alone take about 100)",
    )
    max_train_turns: int | None = Field(
        default=None, ge=1, description="user turns sampled for LoRA (default steps*batch)"
    )
    satisfaction_turns: int = Field(
        default=3000, ge=10, le=1_000_000, description="rated turns the predictor is fitted on"
    )
    act_turns: int = Field(
        default=3000, ge=10, le=1_000_000, description="real contexts the act model is fitted on"
    )
    act_retries: int = Field(
        default=2,
        ge=0,
        le=8,
        description="rewrites of a turn whose question disagrees with its act",
    )
    eval_split: Literal["dev", "test"] = Field(default="test")
    eval_per_domain: int = Field(
        default=40, ge=10, le=100_000, description="held-out contexts per domain"
    )
    eval_dialogues: int = Field(
        default=8, ge=0, le=10_000, description="whole simulated dialogues per domain (0: none)"
    )
    dialogue_max_turns: int = Field(default=12, ge=1, le=64, description="user turns at most")
    measure_before: bool = Field(
        default=True, description="also measure the uncalibrated (prompted) simulator"
    )
    temperature: float = Field(default=0.7, ge=0, le=2, description="sampling when measuring")
    max_new_tokens: int = Field(default=48, ge=1, le=512)
    threads: int | None = Field(default=None, ge=1, le=256, description="torch CPU threads")
    device: str = Field(default="cpu", pattern="^(cpu|cuda|cuda:[0-9]+|mps)$")
    seed: int = Field(default=0, ge=0, le=2**31 - 1)


class CalibrationRequest(CalibrationConfig):
    """``POST /v1/simulator/calibrations``: every option of ``plaudit simulator calibrate``."""

    name: ArtifactName = Field(
        default="uss",
        description="the calibration is stored as a new version of this name",
    )
    note: str | None = Field(
        default=None, max_length=500, pattern=NO_NUL_PATTERN, description="kept in the history"
    )

    def config(self) -> CalibrationConfig:
        return CalibrationConfig(**self.model_dump(exclude={"name", "note"}))


class CalibrationOut(BaseModel):
    name: str
    version: int
    ref: str = Field(description="'name@version', what /v1/simulator/turn takes")
    current: bool
    metrics: dict[str, Any] = Field(description="headline realism before and after, per domain")
    created_at: datetime
    owner: str | None
    job_id: str | None = None


class CalibrationPage(Page[CalibrationOut]):
    """Calibrations, newest first."""
