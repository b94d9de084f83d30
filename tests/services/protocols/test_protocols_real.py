"""A client that sends exactly what OpenRLHF sends, against the real models (both set-ups).

OpenRLHF's single-turn executor posts, per sample and concurrently for a group,
``{"query": [decode(prompt + response tokens)], "prompts": [prompt], "labels": [label]}`` to
``--remote_rm_url`` and reads ``rewards``, ``scores`` and ``extra_logs``. Eight such requests
for one prompt must be scored as one group of eight: SmolLM2-135M-Instruct judges the pairs,
all-MiniLM-L6-v2 measures the spread.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

pytestmark = pytest.mark.slow

PROMPT = (
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
    "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n"
)
RESPONSES = [
    "Paris.",
    "The capital of France is Paris.",
    "Berlin.",
    "I like turtles.",
    "Paris, on the Seine.",
    "Lyon.",
    "Paris",
    "France has no capital.",
]
SPEC = {"channels": {"judge_pairwise": {"weight": 1.0}, "diversity": {"weight": 0.5}}}
URL = "/get_reward"


def _openrlhf_payload(response: str) -> dict[str, Any]:
    # OpenRLHF decodes the prompt and response tokens with skip_special_tokens=False,
    # so the query ends with the end-of-turn token.
    return {"query": [PROMPT + response + "<|im_end|>"], "prompts": [PROMPT], "labels": ["Paris"]}


async def test_eight_single_sample_requests_are_scored_as_one_group(
    client: httpx.AsyncClient,
) -> None:
    params: dict[str, str | int] = {
        "spec": json.dumps(SPEC),
        "group_size": 8,
        "wait_s": 120,
        "run_id": "orl-real",
    }
    responses = await asyncio.gather(
        *(
            client.post(
                URL,
                json=_openrlhf_payload(r),
                params=params,
                headers={"Content-Type": "application/json"},
            )
            for r in RESPONSES
        )
    )
    answers = []
    for response in responses:
        assert response.status_code == 200, response.text
        answers.append(response.json())
    for answer in answers:
        # What OpenRLHF reads: one number each, scores in [0, 1], numeric extra logs.
        assert len(answer["rewards"]) == len(answer["scores"]) == 1
        assert 0.0 <= answer["scores"][0] <= 1.0
        assert all(len(v) == 1 and isinstance(v[0], float) for v in answer["extra_logs"].values())
        assert answer["statuses"] == ["ok"] and answer["extra_logs"]["plaudit_failed"] == [0.0]
        assert answer["extra_logs"]["plaudit_group_size"] == [8.0]
        pairwise = answer["extra_logs"]["plaudit_judge_pairwise"][0]
        diversity = answer["extra_logs"]["plaudit_diversity"][0]
        assert -1.0 <= pairwise <= 1.0
        assert answer["rewards"][0] == pytest.approx(pairwise + 0.5 * diversity)

    # Min-max diversity over the group of eight: exactly one 0 and one 1.
    spread = [a["extra_logs"]["plaudit_diversity"][0] for a in answers]
    assert spread.count(0.0) == 1 and spread.count(1.0) == 1, spread

    page = (await client.get("/v1/rewards/runs/orl-real/groups")).json()
    [stored] = page["groups"]
    results = stored["result"]["results"]
    assert len(results) == 8
    assert sorted(r["total"] for r in results) == pytest.approx(
        sorted(a["rewards"][0] for a in answers)
    )
    meta = results[0]["channels"]["judge_pairwise"]["meta"]
    assert "SmolLM2" in meta["model"] and meta["pairing"] == "adjacent"
    assert "MiniLM" in results[0]["channels"]["diversity"]["meta"]["embedder"]
    # Adjacent pairing over the whole group: every completion was judged against another.
    assert all(r["channels"]["judge_pairwise"]["detail"]["pairs"] >= 1 for r in results)


async def test_a_slime_sample_on_the_real_judge(client: httpx.AsyncClient) -> None:
    body = {"prompt": "What is the capital of France?", "response": "Paris.", "label": "Paris"}
    response = await client.post("/slime/reward", json=body)
    assert response.status_code == 200, response.text
    data = response.json()
    assert data["status"] == "ok" and not data["failed"]
    assert 1.0 <= data["reward"] <= 10.0 and data["reward"] == data["channels"]["judge_scale"]
    assert data["score"] == pytest.approx((data["reward"] - 1) / 9)


TEMPLATED_PROMPTS = {
    "chatml": (
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
        "Face<|im_end|>\n<|im_start|>user\nWhat is the capital of France?<|im_end|>\n"
        "<|im_start|>assistant\n"
    ),
    "llama3": (
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge "
        "Date: December 2023<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWhat is the "
        "capital of France?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
    ),
    "gemma": (
        "<bos><start_of_turn>user\nWhat is the capital of France?<end_of_turn>\n"
        "<start_of_turn>model\n"
    ),
    "mistral": "<s>[INST] What is the capital of France? [/INST]",
}
END_OF_TURN = {"chatml": "<|im_end|>", "llama3": "<|eot_id|>", "gemma": "<end_of_turn>"}


async def test_templated_prompts_reach_the_judge_as_the_plain_question(
    client: httpx.AsyncClient,
) -> None:
    """OpenRLHF's templated query and slime's --apply-chat-template prompt are graded exactly
    as the plain question is: the real judge saw the same text (issue 10)."""
    replies = ["Paris.", "I like turtles."]
    spec = {"channels": {"judge_scale": {"k": 10}}}
    plain = await client.post(
        "/v1/rewards/group",
        json={"prompt": "What is the capital of France?", "completions": replies, "spec": spec},
    )
    assert plain.status_code == 200, plain.text
    expected = [r["total"] for r in plain.json()["results"]]
    for name, prompt in TEMPLATED_PROMPTS.items():
        end = END_OF_TURN.get(name, "</s>")
        body = {"query": [prompt + r + end for r in replies], "prompts": [prompt] * 2}
        answer = await client.post(URL, json=body, params={"spec": json.dumps(spec)})
        assert answer.status_code == 200, answer.text
        assert answer.json()["rewards"] == pytest.approx(expected, abs=1e-6), name
        slime = await client.post(
            "/slime/reward", json={"prompt": prompt, "response": replies[0] + end}
        )
        assert slime.status_code == 200, slime.text
        assert slime.json()["reward"] == pytest.approx(expected[0], abs=1e-6), name


async def test_a_prompt_cut_from_the_left_is_scored_and_flagged(client: httpx.AsyncClient) -> None:
    """OpenRLHF posts the whole prompt beside a query generated from its truncated end."""
    context = "Background: " + "France is a country in Western Europe. " * 40
    prompt = f"<|im_start|>user\n{context}What is its capital?<|im_end|>\n<|im_start|>assistant\n"
    seen = prompt[-120:]
    body = {"query": [seen + "Paris.<|im_end|>"], "prompts": [prompt], "labels": [None]}
    answer = await client.post(URL, json=body)
    assert answer.status_code == 200, answer.text
    data = answer.json()
    assert data["truncated"] == [True] and data["statuses"] == ["ok"]
    assert data["extra_logs"]["plaudit_truncated"] == [1.0]
