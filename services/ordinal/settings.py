"""The ordinal service's settings section (``PLAUDIT_ORDINAL_<FIELD>``)."""

from __future__ import annotations

from pydantic import BaseModel, Field


class OrdinalSettings(BaseModel):
    """The size of one advantages request."""

    max_groups: int = Field(default=10_000, ge=1, description="groups per request")
    max_group_size: int = Field(default=1024, ge=1, description="scores per group")
