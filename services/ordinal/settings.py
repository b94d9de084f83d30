"""The ordinal service's settings section (``PLAUDIT_ORDINAL_<FIELD>``)."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from services.core.settings import Section


class OrdinalSettings(Section):
    """The size of one advantages request."""

    section_name: ClassVar[str] = "ordinal"

    max_groups: int = Field(default=10_000, ge=1, description="groups per request")
    max_group_size: int = Field(default=1024, ge=1, description="scores per group")
