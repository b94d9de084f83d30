"""The evaluation memory's settings section (``PLAUDIT_MEMORY_<FIELD>``)."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field, model_validator

from judges.backends.settings import RoleField, RoleModelSettings, fold_role_fields, role_keys
from services.core.settings import Section


class MemorySettings(Section):
    """How the memory takes scored groups in, summarises steps and revises rubrics."""

    section_name: ClassVar[str] = "memory"

    @model_validator(mode="before")
    @classmethod
    def _fold_llm(cls, data: Any) -> Any:
        """``llm="openai"``, ``llm_base_url=...`` (the environment's spelling) -> ``llm``."""
        return fold_role_fields(data, "llm", "llm") if isinstance(data, dict) else data

    @classmethod
    def folded_keys(cls) -> frozenset[str]:
        """Flat keys the section accepts besides its fields (see Settings.with_overrides)."""
        return role_keys("llm")

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
    llm: RoleField = Field(
        default_factory=RoleModelSettings,
        description="the analyst's and editor's model (docs/models.md): judge (the judge's own "
        "backend, shared with scoring), or a backend of its own: local (a second instance of "
        "the judge's model in its own worker thread, so a long generation never holds up "
        "scoring), vllm or openai. PLAUDIT_MEMORY_LLM names the backend, "
        "PLAUDIT_MEMORY_LLM_<FIELD> sets any other model field (BASE_URL, MODEL, API_KEY, "
        "TIMEOUT_S, MAX_CONCURRENCY, ...)",
    )
    analyst_max_new_tokens: int = Field(default=160, ge=16, le=4096)
    editor_max_new_tokens: int = Field(default=320, ge=16, le=4096)
