"""Property-based fuzzing of the published OpenAPI schema (issue 9): schemathesis generates
requests for every operation and sends them in-process (ASGI) to the all-in-one app, with the
scripted judge and the real MiniLM embedder, on both set-ups. No answer may be a 5xx, and every
answer must have a documented status, content type and a body that matches its documented
schema.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given
from hypothesis import settings as run_settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode, checks
from schemathesis.python import asgi

from services.app import create_app
from services.core.embedder import load_embedder
from services.core.settings import Settings
from tests.judge_service.scripted import ScriptedBackend

KEY = "fuzz-admin-key-0123456789"
#: Examples per operation: enough to reach every branch of each schema, small enough that the
#: run takes about a minute per set-up on two busy cores (under two minutes in all).
EXAMPLES = 20
#: A schema cannot state every rule across fields (``k`` or ``bin_edges``, scores within 1..K,
#: a spec's channels), so a schema-valid request may still be a 422: that check is left out.
SEMANTIC_CHECK = checks.positive_data_acceptance


@pytest.fixture
def fuzz_schema(settings: Settings, tmp_path: Path) -> Iterator[Any]:
    """The app on both set-ups (SQLite; Postgres and Redis), started once by schemathesis.

    KARMA's training data folder is empty here, so a fuzzed ``POST /v1/karma/train`` is
    checked (a 422 for data it cannot use) without training real models for minutes; so is the
    simulator's USS folder, for ``POST /v1/simulator/calibrations``. A synthesis job takes at
    most two documents here (more is a 422), so a fuzzed ``POST /v1/rubrics/synthesize`` starts
    only small jobs on the scripted judge.
    """
    active = settings.with_overrides(
        api_keys={KEY: ["admin", "reward"]},
        karma_data_dir=tmp_path / "no-karma-data",
        karma_models_dir=tmp_path / "karma-models",
        rubrics_synthesis_max_documents=2,
        simulator_data_dir=tmp_path / "no-uss-data",
        simulator_episode_timeout_s=2,
    )
    app = create_app(active, embedder=load_embedder("bundled"), judge_backend=ScriptedBackend())
    yield schemathesis.openapi.from_asgi("/openapi.json", app)
    asgi.shutdown_lifespans()


#: 503s that are a state of the server, not a fault: KARMA before any model was trained (the
#: fuzzed app has none). Documented, with Retry-After; every other 5xx fails the test.
DESIGNED_503 = {"model_not_trained"}


def _designed_unavailable(response: Any) -> bool:
    if response.status_code != 503 or "retry-after" not in response.headers:
        return False
    try:
        error_type = response.json()["error"]["type"]
    except (ValueError, KeyError, TypeError):
        return False
    return error_type in DESIGNED_503


def _fuzz(operation: Any, mode: GenerationMode) -> str | None:
    """The first failure schemathesis finds on ``operation`` (None: none).

    Positive cases fit the schema; negative ones break it (a boolean for a number, a missing
    field, a string past its maxLength) and must get a documented 4xx with the envelope.
    """

    @given(case=operation.as_strategy(generation_mode=mode))
    @run_settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def run(case: schemathesis.Case) -> None:
        response = case.call(headers={"Authorization": f"Bearer {KEY}"})
        if _designed_unavailable(response):
            return
        case.validate_response(response, excluded_checks=[SEMANTIC_CHECK])

    try:
        run()
    except Unsatisfiable:  # nothing to break: the operation takes no parameters
        return None
    except Exception as exc:  # each failure names the check, the request and the answer
        return f"{operation.label} ({mode.value}): {exc}"
    return None


def test_every_operation_answers_as_documented(fuzz_schema: Any) -> None:
    # schemathesis's own pytest plugin does not load under pytest 9, so the operations are
    # driven here; every operation is fuzzed and every failure reported.
    operations = [result.ok() for result in fuzz_schema.get_all_operations()]
    assert len(operations) > 30
    failures = [
        failure
        for op in operations
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
        if (failure := _fuzz(op, mode)) is not None
    ]
    assert not failures, "\n\n".join(failures)
