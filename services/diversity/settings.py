"""The diversity service's settings section (``PLAUDIT_DIVERSITY_<FIELD>``)."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from services.core.settings import Section


class DiversitySettings(Section):
    """The size of one diversity request."""

    section_name: ClassVar[str] = "diversity"

    max_completions: int = Field(default=64, ge=2, description="completions per group")
    max_groups: int = Field(default=256, ge=1, description="groups per batch request")
    max_text_chars: int = Field(default=100_000, ge=1, description="characters per completion")
