"""The token budget of a simulated dialogue (issue 22: with max_completion_length 160, TRL
rollouts came back with 271 and 197 tokens, because the budget was checked only before a user
turn was added). A policy that writes long answers, and one that ignores the budget it is
given, against a stand-in simulator that never ends the dialogue; SmolLM2's real tokenizer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.trainer_client.standin import Reply, StandIn
from trainer_client.simulator import ChatTokens, SimulatorClient, simulate_dialogue

TURN = {
    "message": {"role": "user", "content": "Could you say more about the timing, please?"},
    "done": False,
    "satisfaction": {"expected": 3.0, "distribution": [0.2] * 5},
}
PROMPT = [{"role": "user", "content": "How long should I boil an egg?"}]


@pytest.fixture(scope="module")
def tokens(model_cache_dir: Path) -> ChatTokens:
    from transformers import AutoTokenizer

    from judges.backends.convert import resolve_model_dir

    return ChatTokens(AutoTokenizer.from_pretrained(str(resolve_model_dir(None, model_cache_dir))))


def _policy(answer_tokens: int, *, obey: bool, budgets: list[int | None]) -> Any:
    async def generate(ids: list[int], budget: int | None = None) -> tuple[list[int], list[float]]:
        budgets.append(budget)
        size = answer_tokens if budget is None or not obey else min(answer_tokens, budget)
        return [42] * size, [-0.5] * size

    return generate


@pytest.mark.parametrize("obey", [True, False])
@pytest.mark.parametrize("answer_tokens", [30, 70, 200])
async def test_the_trajectory_never_exceeds_the_budget(
    tokens: ChatTokens, answer_tokens: int, obey: bool
) -> None:
    server = StandIn([], then=Reply(200, TURN)).start()
    simulator = SimulatorClient(server.url)
    budgets: list[int | None] = []
    try:
        rollout = await simulate_dialogue(
            _policy(answer_tokens, obey=obey, budgets=budgets),
            tokens,
            simulator,
            PROMPT,
            max_turns=6,
            max_tokens=160,
        )
    finally:
        await simulator.aclose()
        server.stop()
    assert len(rollout.completion_ids) <= 160
    assert len(rollout.mask) == len(rollout.logprobs) == len(rollout.completion_ids)
    assert rollout.termination == "length"
    assert budgets[0] == 160 and all(b is not None and b > 0 for b in budgets)
    assert len(rollout.satisfaction) == rollout.policy_turns == len(server.requests)
    sent = server.requests[-1].json()["messages"]
    assert sent[-1]["role"] == "assistant", "the cut answer is rated too"


async def test_a_long_prompt_is_cut_from_the_left(tokens: ChatTokens) -> None:
    server = StandIn([], then=Reply(200, {**TURN, "done": True})).start()
    simulator = SimulatorClient(server.url)
    try:
        rollout = await simulate_dialogue(
            _policy(5, obey=True, budgets=[]), tokens, simulator, PROMPT, max_prompt_tokens=8
        )
    finally:
        await simulator.aclose()
        server.stop()
    assert rollout.prompt_ids == tokens.prompt(PROMPT)[-8:]
    assert rollout.termination == "user_done"
