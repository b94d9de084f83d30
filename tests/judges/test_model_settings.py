"""One settings shape per model role, spelled in the environment as before (issue 19)."""

from __future__ import annotations

import pytest

from judges.backends.factory import build_backend, env_name, vllm_engine_args
from judges.backends.openai_backend import OpenAIBackend
from judges.backends.settings import ModelSettings, RoleModelSettings, resolve_role
from judges.backends.vllm_backend import VLLMBackend
from services.core.reliability_settings import LimitsSettings
from services.settings import Settings


def read_env(monkeypatch: pytest.MonkeyPatch, **env: str) -> Settings:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return Settings(_env_file=None)  # type: ignore[call-arg]


def test_the_existing_variables_still_configure_each_role(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = read_env(
        monkeypatch,
        PLAUDIT_JUDGE_BACKEND="openai",
        PLAUDIT_JUDGE_BASE_URL="http://judge/v1",
        PLAUDIT_JUDGE_TIMEOUT_S="30",
        PLAUDIT_JUDGE_API_KEY="judge-key",
        PLAUDIT_MEMORY_LLM="openai",
        PLAUDIT_MEMORY_LLM_BASE_URL="http://memory/v1",
        PLAUDIT_MEMORY_LLM_MODEL="m",
        PLAUDIT_MEMORY_LLM_API_KEY="memory-key",
        PLAUDIT_MEMORY_LLM_TIMEOUT_S="45",
        PLAUDIT_SIMULATOR_BACKEND="local",
        PLAUDIT_SIMULATOR_MODEL="/models/sim",
    )
    assert settings.judge.backend == "openai" and settings.judge.timeout_s == 30
    assert settings.judge.key == "judge-key"
    llm = settings.memory.llm
    assert (llm.backend, llm.base_url, llm.model, llm.timeout_s) == (
        "openai",
        "http://memory/v1",
        "m",
        45,
    )
    assert llm.key == "memory-key"
    assert settings.simulator.llm.backend == "local"
    assert settings.simulator.llm.model == "/models/sim"
    assert settings.rubrics.synthesis.shares_judge


def test_every_model_field_is_spelled_the_same_way_for_every_role(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = read_env(
        monkeypatch,
        PLAUDIT_JUDGE_ATTEMPT_TIMEOUT_S="7",
        PLAUDIT_JUDGE_EXTRA_BODY='{"top_k": 1}',
        PLAUDIT_MEMORY_LLM_MAX_CONCURRENCY="3",
        PLAUDIT_MEMORY_LLM_EXTRA_BODY='{"top_k": 2}',
        PLAUDIT_SIMULATOR_RPM="60",
        PLAUDIT_SIMULATOR_COMPAT="openai",
        PLAUDIT_RUBRICS_SYNTHESIS="vllm",
        PLAUDIT_RUBRICS_SYNTHESIS_TENSOR_PARALLEL_SIZE="2",
        PLAUDIT_RUBRICS_SYNTHESIS_ENGINE_ARGS='{"quantization": "fp8"}',
    )
    assert settings.judge.attempt_timeout_s == 7 and settings.judge.extra_body == {"top_k": 1}
    assert settings.memory.llm.max_concurrency == 3
    assert settings.memory.llm.extra_body == {"top_k": 2}
    assert (settings.simulator.llm.rpm, settings.simulator.llm.compat) == (60, "openai")
    synthesis = settings.rubrics.synthesis
    assert synthesis.backend == "vllm" and synthesis.tensor_parallel_size == 2
    assert synthesis.engine_args == {"quantization": "fp8"}


def test_overrides_take_the_flat_spelling_too() -> None:
    base = Settings(_env_file=None)  # type: ignore[call-arg]
    changed = base.with_overrides(
        simulator_backend="openai", simulator_base_url="http://s/v1", memory_llm_max_retries=0
    )
    assert changed.simulator.llm.backend == "openai"
    assert changed.simulator.llm.base_url == "http://s/v1"
    assert changed.memory.llm.max_retries == 0 and changed.memory.llm.shares_judge


def test_a_retry_fits_in_the_request_deadline_by_default() -> None:
    # Issue 19: the per-attempt timeout was the request deadline (300 s), so no retry could
    # ever follow a timed-out attempt.
    model, deadline = ModelSettings(), LimitsSettings().request_timeout_s
    assert 2 * model.attempt_deadline_s < deadline
    assert ModelSettings(timeout_s=5).attempt_deadline_s == 5  # never past the call's deadline


def test_a_role_of_the_judge_s_kind_takes_its_server_and_model_unless_given() -> None:
    judge = ModelSettings(backend="openai", base_url="http://judge/v1", model="big")
    same = resolve_role(RoleModelSettings(backend="openai", max_concurrency=2), judge)
    assert same is not None and (same.base_url, same.model) == ("http://judge/v1", "big")
    assert same.max_concurrency == 2  # limits are the role's own
    other = resolve_role(RoleModelSettings(backend="local"), judge)
    assert other is not None and other.model is None and other.base_url is None
    assert resolve_role(RoleModelSettings(), judge) is None  # "judge": share it


def test_the_factory_builds_each_kind_from_the_settings() -> None:
    openai = build_backend(
        ModelSettings(
            backend="openai", base_url="http://x/v1", compat="sglang", attempt_timeout_s=9
        )
    )
    assert isinstance(openai, OpenAIBackend) and openai.compat == "sglang"
    vllm = ModelSettings(
        backend="vllm", dtype="bfloat16", max_model_len=4096, tensor_parallel_size=2,
        enforce_eager=True, engine_args={"quantization": "fp8"},
    )  # fmt: skip
    built = build_backend(vllm)
    assert isinstance(built, VLLMBackend)
    assert vllm_engine_args(vllm)["engine_kwargs"] == {"quantization": "fp8"}
    assert built.engine_args == {
        "dtype": "bfloat16",
        "gpu_memory_utilization": 0.85,
        "max_model_len": 4096,
        "tensor_parallel_size": 2,
        "enforce_eager": True,
        "max_logprobs": 20,
        "enable_prefix_caching": True,
        "quantization": "fp8",
    }


def test_an_openai_role_without_a_url_names_the_variable_to_set() -> None:
    with pytest.raises(ValueError, match="PLAUDIT_SIMULATOR_BASE_URL"):
        build_backend(ModelSettings(backend="openai"), role="simulator")
    assert env_name("memory", "timeout_s") == "PLAUDIT_MEMORY_LLM_TIMEOUT_S"
