"""Property-based fuzzing of the published OpenAPI schema (issue 9): schemathesis generates
requests for every operation and sends them in-process (ASGI) to the all-in-one app, with the
scripted judge and the real MiniLM embedder, on both set-ups. No answer may be a 5xx, and every
answer must have a documented status, content type and a body that matches its documented
schema. A request that breaks the schema must be refused (schemathesis's "invalid request
accepted" check), and one that fits it must be accepted ("valid request rejected"), except on the
operations below whose rules a JSON schema cannot state (issue 23, finding 10).
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
from schemathesis.config import SchemathesisConfig
from schemathesis.core.failures import FailureGroup
from schemathesis.python import asgi

from services.app import create_app
from services.core.models.embedder import load_embedder
from services.settings import Settings
from tests.services.judge.scripted import ScriptedBackend

KEY = "fuzz-admin-key-0123456789"
#: Examples per operation: enough to reach every branch of each schema, small enough that the
#: run takes about a minute per set-up on two busy cores (under two minutes in all).
EXAMPLES = 20
#: Operations where a schema-valid request may still be a 422, so the "valid request rejected"
#: check is left out for them (every other check runs): the rule that refuses it spans fields,
#: lengths or server state in a way JSON Schema cannot say. Each reason names the rule.
POSITIVE_EXCLUDED = {
    "POST /v1/ordinal/advantages": "k per request or per group (or bin_edges), scores in 1..K",
    "POST /v1/ordinal/decompose": "k or bin_edges, scores in 1..K",
    "POST /v1/diversity/group": "completion ids unique within the group",
    "POST /v1/diversity/groups": "completion ids unique within each group",
    "POST /v1/judge/pairwise": "template names a registered template",
    "POST /v1/judge/scale": "template names a registered template; grades within 1..k",
    "POST /v1/judge/group": "pairing 'anchor' needs the anchor text; template registered",
    "POST /v1/judge/listwise": "template registered; reply budget fits the group",
    "POST /v1/judge/evaluations": "data names a votes file on the server; votes are MT-Bench rows",
    "POST /v1/rubrics/synthesize": "documents per job within the server's limit",
    "POST /v1/rubrics": "criterion weights within the server's rubrics.max_weight",
    "PUT /v1/rubrics/{rubric_id}": "criterion weights within the server's rubrics.max_weight",
    "POST /v1/rubrics/import": "the body is JSONL rubrics",
    "POST /v1/rubrics/score": "a prompt when the rubric has no question",
    "POST /v1/karma/train": "training data on the server (none in the fuzzed app)",
    "POST /v1/simulator/turn": "the last message is the assistant's",
    "POST /v1/simulator/episodes": "the calibration exists",
    "POST /v1/simulator/calibrations": "USS data on the server (none in the fuzzed app)",
    "POST /v1/rewards/group": "a spec's channels and options (a registry the server holds)",
    "POST /v1/rewards/specs": "a spec's channels and options",
    "POST /v1/runs/{run_id}/rescore": "a spec's channels and options",
    "POST /get_reward": "one prompt per query",
    "POST /slime/reward": "the spec query parameter is JSON",
    "POST /v1/memory/runs/{run_id}/steps/{step}": "rewards and verdicts per completion",
}


#: A body past ``limits.max_body_bytes`` is refused with 413 (documented on every route, but a
#: size the schema cannot state), so a negative case that grew that large was refused too.
_REFUSALS = SchemathesisConfig().projects.default.checks.negative_data_rejection.expected_statuses
CONFIG = SchemathesisConfig.from_dict(
    {"checks": {"negative_data_rejection": {"expected-statuses": [*_REFUSALS, "413"]}}}
)


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
    yield schemathesis.openapi.from_asgi("/openapi.json", app, config=CONFIG)
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

    excluded = [checks.positive_data_acceptance] if operation.label in POSITIVE_EXCLUDED else []

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
        case.validate_response(response, excluded_checks=excluded)

    try:
        run()
    except Unsatisfiable:  # nothing to break: the operation takes no parameters
        return None
    except (Exception, FailureGroup) as exc:  # each names the check, the request, the answer
        found = [*exc.exceptions, exc] if isinstance(exc, FailureGroup) else [exc]
        return f"{operation.label} ({mode.value}): " + "\n".join(map(str, found))
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
