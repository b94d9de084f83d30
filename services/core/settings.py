"""Plaudit settings, read from the environment (prefix ``PLAUDIT_``) and an optional ``.env``.

Nothing here is built at import: call :func:`get_settings` (or construct :class:`Settings`
directly in tests) when a process starts.
"""

from __future__ import annotations

import ipaddress
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

import platformdirs
from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from services.karma.settings import KarmaSettings


class Scope(StrEnum):
    """What an API key may do: ``reward`` for trainers, ``admin`` for the admin API."""

    reward = "reward"
    admin = "admin"


def default_data_dir() -> Path:
    """The per-user data folder (``~/.local/share/plaudit`` on Linux)."""
    return Path(platformdirs.user_data_dir("plaudit", appauthor=False))


class Settings(BaseSettings):
    """Every knob of a Plaudit process. Defaults give the embedded, zero-configuration setup."""

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

    embedder_model: str = Field(
        default="bundled",
        description="sentence-transformers directory, or 'bundled' for all-MiniLM-L6-v2",
    )
    embedder_device: str = "cpu"
    embed_batch_size: int = Field(default=64, ge=1, description="texts per model forward pass")
    batch_max_items: int = Field(default=512, ge=1, description="texts gathered per micro-batch")
    batch_max_wait_ms: float = Field(
        default=5.0, ge=0, description="how long a micro-batch waits for more requests"
    )

    judge_backend: str = Field(
        default="local", description="local (transformers), openai (any compatible server), vllm"
    )
    judge_model: str | None = Field(
        default=None,
        description="local/vllm: HF directory or GGUF file (default SmolLM2-135M-Instruct); "
        "openai: the served model name",
    )
    judge_base_url: str | None = Field(default=None, description="openai backend: server URL")
    judge_api_key: str | None = Field(default=None, description="openai backend: bearer key")
    judge_device: str = "cpu"
    judge_timeout_s: float = Field(default=300.0, gt=0, description="per backend call")
    judge_max_batch_size: int = Field(default=8, ge=1, description="sequences per forward pass")
    judge_max_input_tokens: int = Field(default=2048, ge=16)
    judge_prefix_min_tokens: int = Field(
        default=16,
        ge=0,
        description="local: a prompt prefix shared by a batch runs once when it has at least "
        "this many tokens (0: off)",
    )
    judge_max_concurrency: int = Field(default=8, ge=1, description="openai: requests in flight")
    judge_rpm: int | None = Field(default=None, ge=1, description="openai: requests per minute")
    judge_cache_ttl_s: float = Field(default=7 * 24 * 3600, gt=0)
    judge_max_group_size: int = Field(default=32, ge=2)
    judge_max_pairs: int = Field(default=256, ge=1)

    max_groups_per_request: int = Field(default=10_000, ge=1)
    max_group_size: int = Field(default=1024, ge=1)
    diversity_max_completions: int = Field(default=64, ge=2)
    diversity_max_groups: int = Field(default=256, ge=1)
    max_text_chars: int = Field(default=100_000, ge=1)

    protocol_spec: dict[str, Any] | None = Field(
        default=None,
        description="trainer protocols (/get_reward, /slime/reward): the reward spec as JSON; "
        'default {"channels": {"judge_scale": {"weight": 1.0}}}',
    )
    protocol_group_size: int | None = Field(
        default=None,
        ge=1,
        le=1024,
        description="trainer protocols: samples per prompt (OpenRLHF --n_samples_per_prompt, "
        "slime --n-samples-per-prompt); group channels wait for this many",
    )
    protocol_group_wait_s: float = Field(
        default=60.0,
        gt=0,
        le=600,
        description="trainer protocols: the longest a partial group waits before it is scored "
        "(keep it under the trainer's HTTP timeout: OpenRLHF 180 s, slime 120 s)",
    )
    protocol_on_failure: Literal["neutral", "error"] = Field(
        default="neutral",
        description="trainer protocols: a failed sample gets its group's mean ok total "
        "(neutral, flagged in the response) or the request answers 503 (error)",
    )

    karma: KarmaSettings = Field(default_factory=KarmaSettings)

    @field_validator("log_level")
    @classmethod
    def _upper(cls, value: str) -> str:
        return value.upper()

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
    def embedded(self) -> bool:
        """True when no external Redis is configured (in-process cache and jobs)."""
        return self.redis_url is None


def is_loopback(host: str) -> bool:
    """True for localhost and loopback addresses (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def get_settings() -> Settings:
    """Read settings from the environment now (never cached at import)."""
    return Settings()
