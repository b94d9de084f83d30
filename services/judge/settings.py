"""The judge service's settings section (``PLAUDIT_JUDGE_<FIELD>``)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, SecretStr


class JudgeSettings(BaseModel):
    """Which judge model answers, and the limits of one judge request."""

    backend: str = Field(
        default="local", description="local (transformers), openai (any compatible server), vllm"
    )
    model: str | None = Field(
        default=None,
        description="local/vllm: HF directory or GGUF file (default SmolLM2-135M-Instruct); "
        "openai: the served model name",
    )
    base_url: str | None = Field(default=None, description="openai backend: server URL")
    api_key: str | None = Field(default=None, description="openai backend: bearer key")
    tokenizer: str | None = Field(
        default=None,
        description="openai backend on vLLM/SGLang: local HF directory with the served model's "
        "tokenizer and chat template, so grades of several tokens ('10') are scored whole "
        "(default: the directory the server reports as the model's root, if it exists here)",
    )
    device: str = "cpu"
    timeout_s: float = Field(default=300.0, gt=0, description="per backend call")
    max_batch_size: int = Field(default=8, ge=1, description="sequences per forward pass")
    max_input_tokens: int = Field(default=2048, ge=16)
    prefix_min_tokens: int = Field(
        default=16,
        ge=0,
        description="local: a prompt prefix shared by a batch runs once when it has at least "
        "this many tokens (0: off)",
    )
    pack_tails: bool = Field(
        default=True,
        description="local: choice prompts that share a long prefix and differ in short tails "
        "(rubric criteria of one completion) run as one packed sequence",
    )
    batch_max_rows: int = Field(
        default=64,
        ge=1,
        description="local: prompts of concurrent requests merged into one model call (1: off)",
    )
    batch_max_wait_ms: float = Field(
        default=5.0, ge=0, description="local: how long a merged call waits for more requests"
    )
    # A GPU server batches what is in flight: a low cap here starves it (issue 19; vLLM runs
    # up to 256 sequences at once by default).
    max_concurrency: int = Field(
        default=256,
        ge=1,
        description="openai: requests in flight (per process, or shared through Redis)",
    )
    http_client: Literal["aiohttp", "httpx"] = Field(
        default="aiohttp",
        description="openai: the HTTP library (aiohttp measured faster at many calls in "
        "flight; see BENCHMARKS.md)",
    )
    rpm: int | None = Field(default=None, ge=1, description="openai: requests per minute")
    cache_ttl_s: float = Field(default=7 * 24 * 3600, gt=0)
    max_group_size: int = Field(default=32, ge=2)
    max_pairs: int = Field(default=256, ge=1)
    fence_secret: SecretStr | None = Field(
        default=None,
        description="secret behind the boundary codes of the judge's fences (issue 9); unset: "
        "a random one per process. Set the same value on replicas that share a Redis judge "
        "cache, so that they render the same prompts and share its entries",
    )
