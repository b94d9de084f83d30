"""The settings every Plaudit process shares, read from the environment (prefix ``PLAUDIT_``)
and an optional ``.env``, and the way a service adds its own section.

A service's section is a :class:`Section` that its component declares; ``services.settings``
composes :class:`CoreSettings` with the sections of the services ``services/app.py`` lists
(issue 20: core names no service). A service reads its section with ``JudgeSettings.of(s)``.
Nothing here is built at import: call ``services.settings.get_settings()`` when a process starts.
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Iterable
from enum import StrEnum
from pathlib import Path
from typing import Any, ClassVar, Self

import platformdirs
from pydantic import BaseModel, Field, create_model, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from services.core.jobs.settings import JobsSettings
from services.core.models.embedder_settings import EmbedderSettings
from services.core.reliability_settings import (
    IdempotencySettings,
    LimitsSettings,
    SecuritySettings,
)


class Scope(StrEnum):
    """What an API key may do: ``reward`` for trainers, ``admin`` for the admin API."""

    reward = "reward"
    admin = "admin"


def default_data_dir() -> Path:
    """The per-user data folder (``~/.local/share/plaudit`` on Linux)."""
    return Path(platformdirs.user_data_dir("plaudit", appauthor=False))


class Section(BaseModel):
    """A service's settings section, spelt ``PLAUDIT_<SECTION>_<FIELD>`` in the environment.

    Subclasses name their section: ``section_name: ClassVar[str] = "judge"``.
    """

    section_name: ClassVar[str]
    _defined: ClassVar[dict[str, type[Section]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "section_name" in cls.__dict__:
            Section._defined[cls.section_name] = cls

    @classmethod
    def defined(cls) -> list[type[Section]]:
        """Every section whose module this process imported: what a one-service app composes
        when it is given no settings (its services' sections and those of the services they
        build on, which they import)."""
        return list(Section._defined.values())

    @classmethod
    def of(cls, settings: CoreSettings) -> Self:
        """This section of ``settings`` (a LookupError when the process was composed without it)."""
        found = getattr(settings, cls.section_name, None)
        if not isinstance(found, cls):
            raise LookupError(f"these settings have no {cls.section_name!r} section")
        return found


class CoreSettings(BaseSettings):
    """The knobs every Plaudit process shares. Defaults give the embedded, zero-configuration
    setup; the services' sections are added by :func:`compose_settings`."""

    model_config = SettingsConfigDict(
        env_prefix="PLAUDIT_",
        env_file=".env",
        env_file_encoding="utf-8",
        extra="ignore",
        env_nested_delimiter="_",
        env_nested_max_split=1,
    )

    data_dir: Path = Field(default_factory=default_data_dir)
    database_url: str | None = Field(
        default=None, description="SQLAlchemy async URL; default a SQLite file in data_dir"
    )
    redis_url: str | None = Field(
        default=None, description="redis:// URL; default in-process cache and job runner"
    )
    model_cache_dir: Path | None = Field(
        default=None, description="converted model caches (default data_dir/models)"
    )
    datasets_dir: Path | None = Field(
        default=None,
        description="where `plaudit data fetch` puts datasets (default data_dir/datasets)",
    )
    shared_data_dir: Path | None = Field(
        default=None,
        description="a folder of prepared dataset copies (<dir>/<name>), read for a dataset "
        "that was not fetched",
    )
    auto_migrate: bool = Field(
        default=True, description="run `plaudit db upgrade` at start-up (off in docker-compose)"
    )

    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)
    api_keys: dict[str, list[Scope]] = Field(
        default_factory=dict,
        description='JSON object of key -> scopes, e.g. {"k1": ["reward"], "k2": ["admin"]}',
    )
    log_level: str = "INFO"
    store_texts: bool = Field(
        default=True,
        description="stored groups keep the prompt and completion texts they scored, so a run "
        "can be audited and rescored (POST /v1/runs/{run_id}/rescore); false keeps scores only",
    )

    # Sections: the environment spells a section's field PLAUDIT_<SECTION>_<FIELD>
    # (PLAUDIT_JUDGE_BACKEND -> JudgeSettings.of(settings).backend), and so may keyword
    # arguments (Settings(judge_backend="openai")).
    embedder: EmbedderSettings = Field(default_factory=EmbedderSettings)

    @model_validator(mode="before")
    @classmethod
    def _fold_section_fields(cls, data: Any) -> Any:
        """Accept ``judge_backend=...`` (the environment's spelling) for ``judge={"backend"}``."""
        return fold_section_fields(cls, data) if isinstance(data, dict) else data

    # Issue 9 (reliability): PLAUDIT_IDEMPOTENCY_<FIELD>, PLAUDIT_LIMITS_<FIELD>,
    # PLAUDIT_SECURITY_<FIELD>.
    idempotency: IdempotencySettings = Field(default_factory=IdempotencySettings)
    limits: LimitsSettings = Field(default_factory=LimitsSettings)
    security: SecuritySettings = Field(default_factory=SecuritySettings)

    jobs: JobsSettings = Field(default_factory=JobsSettings)

    @field_validator("model_cache_dir", "datasets_dir", "shared_data_dir", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: Any) -> Any:
        """``PLAUDIT_SHARED_DATA_DIR=`` means unset, not the current folder."""
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("log_level")
    @classmethod
    def _upper(cls, value: str) -> str:
        return value.upper()

    def with_overrides(self, **fields: Any) -> Self:
        """A validated copy with ``fields`` replaced; section fields may be spelled flat.

        Example: ``settings.with_overrides(judge_backend="openai", port=9000)``.
        """
        merged = fold_section_fields(type(self), {**self.model_dump(), **fields})
        return type(self).model_validate(merged)

    @property
    def resolved_database_url(self) -> str:
        """The database URL in force: the configured one or the embedded SQLite file."""
        if self.database_url:
            return self.database_url
        return f"sqlite+aiosqlite:///{self.data_dir / 'plaudit.db'}"

    @property
    def models_dir(self) -> Path:
        """Where converted model caches live (``model_cache_dir``, default data_dir/models)."""
        return self.model_cache_dir or self.data_dir / "models"

    @property
    def datasets_root(self) -> Path:
        """Where fetched datasets live (``datasets_dir``, default data_dir/datasets)."""
        return self.datasets_dir or self.data_dir / "datasets"

    @property
    def embedded(self) -> bool:
        """True when no external Redis is configured (in-process cache and jobs)."""
        return self.redis_url is None


def compose_settings(sections: Iterable[type[Section]]) -> type[CoreSettings]:
    """:class:`CoreSettings` with one field per section (a section listed twice counts once)."""
    fields: dict[str, Any] = {}
    for section in sections:
        name = section.section_name
        if name in CoreSettings.model_fields or fields.get(name, (section,))[0] is not section:
            raise ValueError(f"two settings sections are called {name!r}")
        fields[name] = (section, Field(default_factory=section))
    return create_model("Settings", __base__=CoreSettings, __module__=__name__, **fields)


def fold_section_fields(settings: type[BaseSettings], data: dict[str, Any]) -> dict[str, Any]:
    """``{"judge_backend": x}`` -> ``{"judge": {"backend": x}}``, merged into a given section."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        section, _, field = str(key).partition("_")
        model = _section_model(settings, section)
        if model is not None and _accepts(model, field) and key not in settings.model_fields:
            current = out.get(section, {})
            base = current.model_dump() if isinstance(current, BaseModel) else dict(current)
            out[section] = {**base, field: value}
        else:
            out[key] = value
    return out


def _section_model(settings: type[BaseSettings], name: str) -> type[BaseModel] | None:
    """The section model of field ``name``, or None when it is not a section."""
    field = settings.model_fields.get(name)
    annotation = field.annotation if field is not None else None
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


def _accepts(model: type[BaseModel], field: str) -> bool:
    """True when section ``model`` takes ``field``: one of its fields, or a flat key it folds
    into one (a model role's ``llm_base_url``; see judges.backends.settings)."""
    folded = getattr(model, "folded_keys", None)
    return field in model.model_fields or (callable(folded) and field in folded())


@functools.lru_cache(maxsize=4096)  # every request asks, for a few client hosts (issue 19)
def is_loopback(host: str) -> bool:
    """True for localhost and loopback addresses (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
