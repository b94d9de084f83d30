"""The client's request bodies are the server's wire models (issue 20).

The endpoint methods build their bodies as dicts (so that the server, not the client, refuses a
bad value, with its 422 envelope and request id); these tests hold every body they build to the
request model in ``plaudit_wire`` that the server validates it with, every optional argument
given, so a field renamed on either side fails here rather than in a user's training run. The
trainer adapters send ``RewardsGroupRequest`` itself (``send_rewards_group``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from plaudit_wire.diversity import DiversityBatchRequest, DiversityRequest
from plaudit_wire.judge import GroupRequest, PairwiseRequest, ScaleRequest
from plaudit_wire.ordinal import AdvantagesRequest, DecomposeRequest
from plaudit_wire.rewards import RewardsGroupRequest, ValidateRequest
from trainer_client._api import ANSWERS, Call, Endpoints

SPEC = {"channels": {"diversity": {"weight": 0.5}, "judge_scale": {"k": 5}}}
CHAT = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}]


class Recorder(Endpoints[Call]):
    """The endpoint methods with the sending left out: each answers the call it built."""

    def _call(self, call: Call) -> Call:
        return call


#: Each endpoint method with every optional argument, and the model its body must be.
CALLS: list[tuple[str, Callable[[Recorder], Call], type[BaseModel]]] = [
    (
        "ordinal_advantages",
        lambda c: c.ordinal_advantages(
            [[1, 3, 5, 5], {"id": "g2", "scores": [2, 4], "k": 5}],
            k=5,
            estimator="odrpo",
            run_id="r1",
            step=3,
        ),
        AdvantagesRequest,
    ),
    (
        "ordinal_decompose",
        lambda c: c.ordinal_decompose([1.0, 3.0], bin_edges=[0.5, 2.5]),
        DecomposeRequest,
    ),
    (
        "diversity_group",
        lambda c: c.diversity_group(
            ["a cat", {"id": "b", "text": "a dog"}],
            group_id="g1",
            metric="pairwise_cosine",
            scaling="none",
            weight=0.5,
            run_id="r1",
            step=3,
        ),
        DiversityRequest,
    ),
    (
        "diversity_groups",
        lambda c: c.diversity_groups(
            [["a", "b"], {"id": "p2", "completions": ["x", "y"]}], run_id="r1", step=3
        ),
        DiversityBatchRequest,
    ),
    (
        "judge_pairwise",
        lambda c: c.judge_pairwise(
            CHAT, "4", "5", mode="generate", swap=False, criteria="correctness"
        ),
        PairwiseRequest,
    ),
    (
        "judge_group",
        lambda c: c.judge_group(
            "Name a prime.",
            ["7", "9", "2"],
            pairing="round_robin",
            scoring="win_rate",
            run_id="r1",
            step=3,
        ),
        GroupRequest,
    ),
    (
        "judge_scale",
        lambda c: c.judge_scale(CHAT, ["4", "5"], k=10, run_id="r1", step=3),
        ScaleRequest,
    ),
    (
        "rewards_group",
        lambda c: c.rewards_group(
            CHAT,
            ["4", {"id": "b", "text": "5"}],
            SPEC,
            run_id="r1",
            step=3,
            finish_reasons=["stop", "length"],
            token_counts=[1, 1],
            id="g1",
            columns={"rubric_id": "rb_1@2"},
        ),
        RewardsGroupRequest,
    ),
    ("rewards_validate", lambda c: c.rewards_validate(SPEC), ValidateRequest),
]


@pytest.mark.parametrize(("name", "make", "model"), CALLS, ids=[name for name, _, _ in CALLS])
def test_every_body_the_client_builds_is_the_servers_request_model(
    name: str, make: Callable[[Recorder], Call], model: type[BaseModel]
) -> None:
    call = make(Recorder())
    parsed = model.model_validate(call.json)
    sent = {key for key, value in call.json.items() if value is not None}
    assert sent <= parsed.model_fields_set, f"{name} sent fields the model ignores"
    assert call.answer is ANSWERS[call.path]


def test_every_endpoint_with_a_body_is_held_to_its_model() -> None:
    # ANSWERS names every route whose method posts a body (the others are GETs).
    assert {make(Recorder()).path for _, make, _ in CALLS} == set(ANSWERS)


def test_a_field_the_server_does_not_know_fails_the_contract() -> None:
    # The models forbid unknown fields, so a renamed field on either side is caught above.
    call = Recorder().judge_scale("2+2?", ["4"], grades=10)
    with pytest.raises(ValidationError, match="grades"):
        ScaleRequest.model_validate(call.json)


def _fields(model: type[BaseModel]) -> set[str]:
    return set(model.model_fields)


def test_the_adapters_send_the_wire_model_itself() -> None:
    request = RewardsGroupRequest.model_validate(
        {"prompt": "2+2?", "completions": ["4", "5"], "spec": SPEC, "run_id": "r1", "step": 1}
    )
    call: Any = Recorder().send_rewards_group(request, idempotency_key="k1")
    assert RewardsGroupRequest.model_validate(call.json) == request
    assert set(call.json) <= _fields(RewardsGroupRequest)
