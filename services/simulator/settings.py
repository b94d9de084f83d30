"""Simulator settings: one section of :class:`services.core.settings.Settings`
(``PLAUDIT_SIMULATOR_*``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field, model_validator

from judges.backends.settings import RoleField, RoleModelSettings, fold_role_fields, role_keys
from services.core.settings import Section


class SimulatorSettings(Section):
    """``PLAUDIT_SIMULATOR_BACKEND``, ``PLAUDIT_SIMULATOR_BASE_URL``, ..."""

    section_name: ClassVar[str] = "simulator"

    @model_validator(mode="before")
    @classmethod
    def _fold_llm(cls, data: Any) -> Any:
        """``backend="openai"``, ``base_url=...`` (the environment's spelling) -> ``llm``."""
        return fold_role_fields(data, "llm", "") if isinstance(data, dict) else data

    @classmethod
    def folded_keys(cls) -> frozenset[str]:
        """Flat keys the section accepts besides its fields (see Settings.with_overrides)."""
        return role_keys("")

    llm: RoleField = Field(
        default_factory=RoleModelSettings,
        description="the uncalibrated simulator's model (docs/models.md): judge shares the "
        "judge's backend (the embedded SmolLM2-135M by default, no second copy in memory); "
        "local, vllm or openai give it its own. Spelled flat: PLAUDIT_SIMULATOR_BACKEND, "
        "PLAUDIT_SIMULATOR_MODEL, PLAUDIT_SIMULATOR_BASE_URL, PLAUDIT_SIMULATOR_TIMEOUT_S, ...",
    )
    data_dir: Path | None = Field(
        default=None,
        description="folder with sgd/mwoz/ccpe.jsonl.gz (USS format; default: the uss dataset, "
        "`plaudit data fetch uss`)",
    )
    data_roots: list[Path] = Field(
        default_factory=list,
        description="more folders a calibration job or an evaluation may read dialogues from",
    )
    max_messages: int = Field(
        default=64, ge=2, le=1000, description="most messages one turn request may carry"
    )
    max_new_tokens: int = Field(
        default=64, ge=1, le=1024, description="longest user message generated (tokens)"
    )
    loaded_calibrations: int = Field(
        default=2, ge=1, le=16, description="calibrated models kept loaded at once"
    )
    episode_timeout_s: float = Field(
        default=60.0, gt=0, le=600, description="how long one policy call of an episode may take"
    )
    allow_private_policy_urls: bool = Field(
        default=True,
        description="let /v1/simulator/episodes call policy URLs on loopback and private "
        "networks (the usual place of a policy being trained); false in shared deployments",
    )
