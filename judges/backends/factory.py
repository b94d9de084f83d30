"""The one place a model backend is built, for every role (issue 19).

:func:`build_backend` turns a :class:`~judges.backends.settings.ModelSettings` into a
:class:`~judges.backends.base.JudgeBackend`, so a timeout, a retry or a limit means the same
for the judge, the memory's analyst and editor, the simulator and the synthesis generator.
Imports are lazy: torch only for ``local``, vllm only when its engine starts.

Limits (``max_concurrency``, ``rpm``) of an ``openai`` backend are per role: with a Redis URL
they are shared by every Plaudit process under the name ``{role}:{base_url}:{model}``, so N
replicas together keep to them; without one they hold in this process.

Example::

    backend = build_backend(JudgeSettings.of(settings), role="judge", models_dir=Path("models"))
    await backend.start()
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from judges.backends.base import JudgeBackend
from judges.backends.settings import ModelSettings
from judges.model_worker import BatchRecord

OnBatch = Callable[[BatchRecord], None]


def build_backend(
    settings: ModelSettings,
    *,
    role: str = "judge",
    models_dir: Path | None = None,
    redis_url: str | None = None,
    on_batch: OnBatch | None = None,
) -> JudgeBackend:
    """The backend ``settings`` describe, for ``role`` (it names the shared limits).

    ``models_dir`` holds converted model caches (local, vllm); ``on_batch`` sees every
    merged model call of the local backend (metrics).
    """
    if settings.backend == "local":
        return _local(settings, models_dir, on_batch)
    if settings.backend == "openai":
        return _openai(settings, role, redis_url)
    return _vllm(settings, models_dir)


def _local(
    settings: ModelSettings, models_dir: Path | None, on_batch: OnBatch | None
) -> JudgeBackend:
    from judges.backends.local import LocalBackend

    return LocalBackend(
        settings.model,
        cache_dir=models_dir,
        device=settings.device,
        max_batch_size=settings.max_batch_size,
        max_input_tokens=settings.max_input_tokens,
        timeout_s=settings.timeout_s,
        prefix_min_tokens=settings.prefix_min_tokens,
        pack_tails=settings.pack_tails,
        batch_max_rows=settings.batch_max_rows,
        batch_max_wait_s=settings.batch_max_wait_ms / 1000,
        on_batch=on_batch,
    )


def _openai(settings: ModelSettings, role: str, redis_url: str | None) -> JudgeBackend:
    from judges.backends.openai_backend import OpenAIBackend, OpenAIConfig
    from judges.limits import make_limiter
    from plaudit_wire.retry import Backoff

    if not settings.base_url:
        raise ValueError(
            f"the {role}'s openai backend needs a base URL (with /v1), e.g. "
            f"{env_name(role, 'base_url')}; its model is the first one the server lists "
            "unless one is named"
        )
    config = OpenAIConfig(
        settings.base_url,
        settings.model or "",
        api_key=settings.key,
        timeout_s=settings.timeout_s,
        retry=Backoff(max_retries=settings.max_retries),
        max_concurrency=settings.max_concurrency,
        extra_body=dict(settings.extra_body),
        http_client=settings.http_client,
    )
    limiter = make_limiter(
        redis_url,
        name=f"{role}:{settings.base_url}:{settings.model}",
        max_concurrency=settings.max_concurrency,
        rpm=settings.rpm,
    )
    return OpenAIBackend(
        config,
        limiter=limiter,
        owns_limiter=True,
        compat=settings.compat,
        attempt_timeout_s=settings.attempt_deadline_s,
        tokenizer=settings.tokenizer,
    )


def _vllm(settings: ModelSettings, models_dir: Path | None) -> JudgeBackend:
    from judges.backends.vllm_backend import VLLMBackend

    return VLLMBackend(
        settings.model,
        cache_dir=models_dir,
        timeout_s=settings.timeout_s,
        **vllm_engine_args(settings),
    )


def vllm_engine_args(settings: ModelSettings) -> dict[str, Any]:
    """The in-process vLLM engine's arguments from a role's settings.

    >>> vllm_engine_args(ModelSettings(backend="vllm", dtype="bfloat16"))["dtype"]
    'bfloat16'
    """
    return {
        "dtype": settings.dtype,
        "gpu_memory_utilization": settings.gpu_memory_utilization,
        "max_model_len": settings.max_model_len,
        "tensor_parallel_size": settings.tensor_parallel_size,
        "enforce_eager": settings.enforce_eager,
        "engine_kwargs": dict(settings.engine_args),
    }


#: How each role's settings are spelled in the environment (see docs/models.md).
ROLE_ENV = {
    "judge": "PLAUDIT_JUDGE_",
    "memory": "PLAUDIT_MEMORY_LLM_",
    "simulator": "PLAUDIT_SIMULATOR_",
    "synthesis": "PLAUDIT_RUBRICS_SYNTHESIS_",
}


def env_name(role: str, field: str) -> str:
    """The environment variable of one role's field, for error messages.

    >>> env_name("memory", "base_url")
    'PLAUDIT_MEMORY_LLM_BASE_URL'
    """
    return ROLE_ENV.get(role, f"PLAUDIT_{role.upper()}_") + field.upper()
