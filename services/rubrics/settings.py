"""The rubrics service's settings section (``PLAUDIT_RUBRICS_<FIELD>``)."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field, model_validator

from judges.backends.settings import RoleField, RoleModelSettings, fold_role_fields, role_keys
from services.core.settings import Section


class RubricsSettings(Section):
    """The size limits of a rubric and of one scoring request."""

    section_name: ClassVar[str] = "rubrics"

    @model_validator(mode="before")
    @classmethod
    def _fold_synthesis(cls, data: Any) -> Any:
        """``synthesis="openai"``, ``synthesis_base_url=...`` -> ``synthesis``."""
        return fold_role_fields(data, "synthesis", "synthesis") if isinstance(data, dict) else data

    @classmethod
    def folded_keys(cls) -> frozenset[str]:
        """Flat keys the section accepts besides its fields (see Settings.with_overrides)."""
        return role_keys("synthesis")

    max_criteria: int = Field(default=50, ge=1, description="criteria per rubric")
    max_weight: float = Field(default=100.0, gt=0, description="largest criterion weight")
    max_completions: int = Field(default=32, ge=1, description="completions per score request")
    max_import_lines: int = Field(default=1000, ge=1, description="rubrics per JSONL import")
    generate_max_new_tokens: int = Field(
        default=512, ge=16, le=4096, description="generate mode: tokens of the JSON verdicts"
    )
    # --- synthesis (services/rubrics/synthesis) -------------------------------------------
    synthesis: RoleField = Field(
        default_factory=RoleModelSettings,
        description="the synthesis generator's model (docs/models.md): judge (the judge's "
        "backend and cache) or local, vllm or openai of its own. PLAUDIT_RUBRICS_SYNTHESIS "
        "names the backend, PLAUDIT_RUBRICS_SYNTHESIS_<FIELD> sets any other model field",
    )
    synthesis_max_documents: int = Field(
        default=1000, ge=1, description="documents per synthesis job (inline or from a corpus)"
    )
    synthesis_max_new_tokens: int = Field(
        default=512, ge=64, le=8192, description="tokens of one generated instance (JSON)"
    )
    synthesis_batch: int = Field(
        default=4,
        ge=1,
        le=256,
        description="documents generated per backend call (each call must finish within "
        "PLAUDIT_JUDGE_TIMEOUT_S; 8 at 512 tokens ran past 300 s on two busy cores)",
    )
