"""The judge service's settings section (``PLAUDIT_JUDGE_<FIELD>``).

The judge's model fields (backend, model, timeouts, limits, ...) are the shared
:class:`~judges.backends.settings.ModelSettings` shape every model role uses (docs/models.md).
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field, SecretStr

from judges.backends.settings import ModelSettings
from services.core.settings import Section


class JudgeSettings(ModelSettings, Section):
    """Which judge model answers (:class:`ModelSettings`), and the limits of one judge request."""

    section_name: ClassVar[str] = "judge"

    cache_ttl_s: float = Field(default=7 * 24 * 3600, gt=0)
    max_group_size: int = Field(default=32, ge=2)
    max_pairs: int = Field(default=256, ge=1)
    channel_cache: bool = Field(
        default=True,
        description="the judge's reward channels (judge_pairwise, judge_scale, judge_listwise) "
        "look verdicts up in the judge cache and store them; false for training traffic, whose "
        "sampled completions rarely repeat (each stored verdict costs CPU and cache memory)",
    )
    fence_secret: SecretStr | None = Field(
        default=None,
        description="secret behind the boundary codes of the judge's fences (issue 9); unset: "
        "a random one per process. Set the same value on replicas that share a Redis judge "
        "cache, so that they render the same prompts and share its entries",
    )
