"""One settings shape for every model role (issue 19): the judge, the memory's analyst and
editor, the user simulator and the rubric synthesis generator.

:class:`ModelSettings` says which backend a role runs on (``local`` transformers, in-process
``vllm`` or an ``openai``-compatible server) and how it is called: timeouts, retries,
concurrency and rate limits, key, model, compatibility and extra request fields, and the
engine arguments of the local and vLLM backends. The judge's section *is* a
:class:`ModelSettings` (``PLAUDIT_JUDGE_BACKEND``, ``PLAUDIT_JUDGE_TIMEOUT_S``, ...). The other
roles hold a :class:`RoleModelSettings`, whose backend may also be ``judge``: share the judge's
backend (one model in memory, one cache). :func:`resolve_role` turns a role into the settings
its backend is built from; :mod:`judges.backends.factory` builds it.

A role's settings are spelled flat in the environment: :func:`fold_role_fields` gathers
``PLAUDIT_MEMORY_LLM=openai`` and ``PLAUDIT_MEMORY_LLM_BASE_URL=...`` into ``memory.llm``.

Example::

    judge = ModelSettings(backend="openai", base_url="http://vllm:8000/v1")
    memory = RoleModelSettings(backend="openai", max_concurrency=2)
    resolve_role(memory, judge).base_url  # the judge's server: same kind, no URL of its own
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, SecretStr, field_validator
from pydantic_settings import NoDecode

BackendKind = Literal["local", "vllm", "openai"]
Compat = Literal["vllm", "sglang", "openai"]
#: Fields a role takes from the judge's settings when it runs the same kind of backend and
#: leaves them unset: the model and the server are the judge's unless said otherwise.
INHERITED = ("model", "base_url", "api_key")


class ModelFields(BaseModel):
    """Every field of a model role except which backend it runs on."""

    model: str | None = Field(
        default=None,
        description="local/vllm: HF directory or GGUF file (default the bundled "
        "SmolLM2-135M-Instruct); openai: the served model name (default the first one the "
        "server lists)",
    )
    base_url: str | None = Field(default=None, description="openai: the server's URL, with /v1")
    api_key: SecretStr | None = Field(default=None, description="openai: bearer key")
    compat: Compat = Field(
        default="vllm",
        description="openai: which request fields the server takes (vllm, sglang or openai)",
    )
    timeout_s: float = Field(
        default=300.0, gt=0, description="deadline of one backend call (local, vllm)"
    )
    attempt_timeout_s: float = Field(
        default=60.0,
        gt=0,
        description="openai: one HTTP attempt; well below the request deadline "
        "(PLAUDIT_LIMITS_REQUEST_TIMEOUT_S, 300 s) so that a retry can happen",
    )
    max_retries: int = Field(
        default=3, ge=0, le=10, description="openai: retries after a timeout, 408, 429 or 5xx"
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
    tokenizer: str | None = Field(
        default=None,
        description="openai on vLLM/SGLang: local HF directory with the served model's "
        "tokenizer and chat template, so grades of several tokens ('10') are scored whole "
        "(default: the directory the server reports as the model's root, if it exists here)",
    )
    rpm: int | None = Field(default=None, ge=1, description="openai: requests per minute")
    extra_body: dict[str, Any] = Field(
        default_factory=dict,
        description="openai: JSON object merged into every request body "
        '(e.g. {"chat_template_kwargs": {"enable_thinking": false}})',
    )
    device: str = Field(default="cpu", description="local: torch device")
    max_batch_size: int = Field(default=8, ge=1, description="local: sequences per forward pass")
    max_input_tokens: int = Field(default=2048, ge=16, description="local: longest prompt")
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
    dtype: str = Field(default="auto", description="vllm: weight dtype (auto, bfloat16, ...)")
    max_model_len: int | None = Field(
        default=None, ge=16, description="vllm: context length (default the model's)"
    )
    gpu_memory_utilization: float = Field(
        default=0.85, gt=0, le=1, description="vllm: share of GPU memory the engine may take"
    )
    tensor_parallel_size: int = Field(default=1, ge=1, description="vllm: GPUs per model")
    enforce_eager: bool = Field(default=False, description="vllm: no CUDA graphs")
    engine_args: dict[str, Any] = Field(
        default_factory=dict,
        description='vllm: more engine arguments, a JSON object (e.g. {"quantization": "fp8"})',
    )

    @field_validator("extra_body", "engine_args", mode="before")
    @classmethod
    def _json_object(cls, value: Any) -> Any:
        """A JSON string from the environment (a folded role field is not decoded for us)."""
        return json.loads(value) if isinstance(value, str) else value

    @property
    def attempt_deadline_s(self) -> float:
        """The per-attempt timeout in force: never longer than the call's deadline."""
        return min(self.attempt_timeout_s, self.timeout_s)

    @property
    def key(self) -> str | None:
        """The API key in clear, for the HTTP header."""
        return self.api_key.get_secret_value() if self.api_key else None


class ModelSettings(ModelFields):
    """A model backend, fully described: ``local``, ``vllm`` or ``openai``."""

    backend: BackendKind = Field(
        default="local",
        description="local (transformers, in process), vllm (in process, for a GPU box) or "
        "openai (any OpenAI-compatible server: vLLM, SGLang, a hosted API)",
    )


class RoleModelSettings(ModelFields):
    """A role's model: the judge's own backend (``judge``, the default) or one of its own."""

    backend: Literal["judge", "local", "vllm", "openai"] = Field(
        default="judge",
        description="judge (share the judge's backend and cache), or local, vllm or openai: a "
        "backend of its own (model, base_url and api_key default to the judge's when it is "
        "the judge's kind of backend)",
    )

    @property
    def shares_judge(self) -> bool:
        """True when the role uses the judge's backend itself."""
        return self.backend == "judge"


#: A role field of a settings section. The environment gives it a bare backend name
#: (``PLAUDIT_MEMORY_LLM=openai``), so pydantic-settings must not JSON-decode it.
RoleField = Annotated[RoleModelSettings, NoDecode]


def resolve_role(role: RoleModelSettings, judge: ModelSettings) -> ModelSettings | None:
    """The settings ``role``'s own backend is built from; None when it shares the judge's.

    >>> judge = ModelSettings(backend="openai", base_url="http://judge/v1")
    >>> resolve_role(RoleModelSettings(backend="openai"), judge).base_url
    'http://judge/v1'
    >>> resolve_role(RoleModelSettings(), judge) is None
    True
    """
    if role.backend == "judge":
        return None
    fields = role.model_dump(exclude={"backend"})
    if role.backend == judge.backend:
        for name in INHERITED:
            if fields[name] is None:
                fields[name] = getattr(judge, name)
    return ModelSettings(backend=role.backend, **fields)


def role_keys(prefix: str) -> frozenset[str]:
    """The flat keys :func:`fold_role_fields` gathers for a role spelled with ``prefix``."""
    names = [*ModelFields.model_fields, "backend"]
    if not prefix:
        return frozenset(names)
    return frozenset([prefix, *(f"{prefix}_{name}" for name in names)])


def fold_role_fields(data: dict[str, Any], field: str, prefix: str) -> dict[str, Any]:
    """Gather a role's flat keys into ``data[field]`` (a section validator's first step).

    ``prefix_<name>`` sets the role's ``<name>``; a bare ``prefix`` holding a string names the
    backend (or is a JSON object of fields); with ``prefix=""`` the model field names
    themselves are flat (``PLAUDIT_SIMULATOR_BACKEND``).

    >>> fold_role_fields({"llm": "openai", "llm_max_concurrency": "2"}, "llm", "llm")
    {'llm': {'backend': 'openai', 'max_concurrency': '2'}}
    """
    out = dict(data)
    role = _as_dict(out.pop(field, None))
    if prefix and isinstance(out.get(prefix), str):
        role.update(_as_dict(out.pop(prefix)))
    start = f"{prefix}_" if prefix else ""
    for key in role_keys(prefix) - {prefix}:
        if key in out:
            role[key.removeprefix(start)] = out.pop(key)
    out[field] = role
    return out


def _as_dict(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if isinstance(value, BaseModel):
        return value.model_dump(exclude_unset=True)
    if isinstance(value, str):
        text = value.strip()
        return dict(json.loads(text)) if text.startswith("{") else {"backend": text}
    return dict(value)
