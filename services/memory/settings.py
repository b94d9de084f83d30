"""The evaluation memory's settings section (``PLAUDIT_MEMORY_<FIELD>``)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, SecretStr


class MemorySettings(BaseModel):
    """How the memory takes scored groups in, summarises steps and revises rubrics."""

    queue_size: int = Field(default=1000, ge=1, description="scored groups waiting for ingest")
    revise_every: int = Field(default=5, ge=1, description="steps between revisions (per run)")
    saturation_threshold: float = Field(
        default=0.9, gt=0, le=1, description="a criterion whose pass rate reaches this saturates"
    )
    analyses_per_step: int = Field(
        default=2, ge=0, le=32, description="rollouts the analyst reads per revision"
    )
    static_steps: int = Field(default=3, ge=0, description="retrieval: the last N steps' records")
    dynamic_top: int = Field(default=6, ge=0, description="retrieval: the most similar records")
    budget_chars: int = Field(
        default=2400, ge=100, description="retrieval: characters of history the editor reads"
    )
    dedup_similarity: float = Field(
        default=0.95, gt=0, le=1, description="retrieval: records this similar count once"
    )
    retrieval: bool = Field(default=True, description="give the editor history (off: no memory)")
    max_operations: int = Field(default=3, ge=1, description="edit operations per revision")
    near_duplicate: float = Field(
        default=0.9, gt=0, le=1, description="a new criterion this similar to another is refused"
    )
    undo_window: int = Field(
        default=5, ge=0, description="an edit that undoes one of the last N revisions is held"
    )
    frozen_rollouts: int = Field(
        default=8, ge=0, le=64, description="stored completions re-scored before a version is used"
    )
    max_flip_rate: float = Field(
        default=0.34,
        ge=0,
        le=1,
        description="held: a version that flips more of the frozen verdicts without evidence",
    )
    hacking_corr_rise: float = Field(
        default=0.3, gt=0, le=2, description="reward-length correlation rise that flags hacking"
    )
    llm: Literal["judge", "openai"] = Field(
        default="judge",
        description="the analyst and editor: the judge's model (embedded SmolLM2 by default) or "
        "an OpenAI-compatible server",
    )
    llm_base_url: str | None = Field(default=None, description="openai: server URL (with /v1)")
    llm_model: str | None = Field(default=None, description="openai: the served model name")
    llm_api_key: SecretStr | None = None
    llm_timeout_s: float = Field(default=300.0, gt=0)
    analyst_max_new_tokens: int = Field(default=160, ge=16, le=4096)
    editor_max_new_tokens: int = Field(default=320, ge=16, le=4096)
