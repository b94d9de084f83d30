"""The rubrics service's settings section (``PLAUDIT_RUBRICS_<FIELD>``)."""

from __future__ import annotations

from pydantic import BaseModel, Field


class RubricsSettings(BaseModel):
    """The size limits of a rubric and of one scoring request."""

    max_criteria: int = Field(default=50, ge=1, description="criteria per rubric")
    max_weight: float = Field(default=100.0, gt=0, description="largest criterion weight")
    max_completions: int = Field(default=32, ge=1, description="completions per score request")
    max_import_lines: int = Field(default=1000, ge=1, description="rubrics per JSONL import")
    generate_max_new_tokens: int = Field(
        default=512, ge=16, le=4096, description="generate mode: tokens of the JSON verdicts"
    )
    # --- synthesis (services/rubrics/synthesis) -------------------------------------------
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
