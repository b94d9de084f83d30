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
