"""Build the judge backend that settings ask for (imports are lazy: torch only for ``local``)."""

from __future__ import annotations

from collections.abc import Callable

from judges.backends.base import JudgeBackend
from judges.model_worker import BatchRecord
from services.core.settings import Settings


def make_backend(
    settings: Settings, *, on_batch: Callable[[BatchRecord], None] | None = None
) -> JudgeBackend:
    """``local`` (transformers, the default), ``openai`` (any compatible server) or ``vllm``.

    ``on_batch`` sees every merged model call of the local backend (metrics).
    """
    kind = settings.judge.backend
    if kind == "local":
        from judges.backends.local import LocalBackend

        return LocalBackend(
            settings.judge.model,
            cache_dir=settings.models_dir,
            device=settings.judge.device,
            max_batch_size=settings.judge.max_batch_size,
            max_input_tokens=settings.judge.max_input_tokens,
            timeout_s=settings.judge.timeout_s,
            prefix_min_tokens=settings.judge.prefix_min_tokens,
            pack_tails=settings.judge.pack_tails,
            batch_max_rows=settings.judge.batch_max_rows,
            batch_max_wait_s=settings.judge.batch_max_wait_ms / 1000,
            on_batch=on_batch,
        )
    if kind == "openai":
        return _openai(settings)
    if kind == "vllm":
        return _vllm(settings)
    raise ValueError(f"unknown judge backend {kind!r}: choose local, openai or vllm")


def _openai(settings: Settings) -> JudgeBackend:
    from judges.backends.openai_backend import OpenAIBackend, OpenAIConfig
    from judges.limits import make_limiter

    if not settings.judge.base_url:
        raise ValueError(
            "the openai judge backend needs PLAUDIT_JUDGE_BASE_URL (with /v1); "
            "PLAUDIT_JUDGE_MODEL names the served model (default: the first one it lists)"
        )
    config = OpenAIConfig(
        settings.judge.base_url,
        settings.judge.model or "",
        api_key=settings.judge.api_key,
        timeout_s=settings.judge.timeout_s,
        max_concurrency=settings.judge.max_concurrency,
        http_client=settings.judge.http_client,
    )
    # Limits are shared by every Plaudit process through Redis when it is configured.
    limiter = make_limiter(
        settings.redis_url,
        name=f"judge:{settings.judge.base_url}:{settings.judge.model}",
        max_concurrency=settings.judge.max_concurrency,
        rpm=settings.judge.rpm,
    )
    return OpenAIBackend(
        config, limiter=limiter, owns_limiter=True, tokenizer=settings.judge.tokenizer
    )


def _vllm(settings: Settings) -> JudgeBackend:
    from judges.backends.vllm_backend import VLLMBackend

    return VLLMBackend(
        settings.judge.model,
        cache_dir=settings.models_dir,
        timeout_s=settings.judge.timeout_s,
    )
