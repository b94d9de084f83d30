"""OpenRLHF and slime talking to the real ``plaudit serve all`` over TCP, as they do.

Both trainers can only be given a URL, so the API key travels in it (HTTP Basic), and
OpenRLHF sends one sample per request, concurrently for a prompt's group.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import quote, urlsplit

import httpx
import pytest

from tests.trainer_client.conftest import LiveServer

pytestmark = pytest.mark.slow

PROMPT = "<|im_start|>user\nName a fruit.<|im_end|>\n<|im_start|>assistant\n"
ANSWERS = ["Apple.", "A banana.", "Cherry!", "Mango, ripe.", "Pear.", "Grapes.", "Kiwi.", "Plum."]


def _with_key(server: LiveServer, path: str) -> str:
    parts = urlsplit(server.url)
    return f"http://plaudit:{server.reward_key}@{parts.netloc}{path}"


def test_openrlhf_group_of_8_single_sample_requests_over_tcp(live_all_server: LiveServer) -> None:
    spec = quote(json.dumps({"channels": {"diversity": {"weight": 1.0}}}), safe="")
    url = _with_key(live_all_server, f"/get_reward?group_size=8&run_id=orlhf-tcp&spec={spec}")

    def send(answer: str) -> dict[str, Any]:
        body = {"query": [PROMPT + answer + "<|im_end|>"], "prompts": [PROMPT], "labels": [None]}
        response = httpx.post(url, json=body, timeout=120)
        assert response.status_code == 200, response.text
        data: dict[str, Any] = response.json()
        return data

    with ThreadPoolExecutor(max_workers=8) as pool:
        answers = list(pool.map(send, ANSWERS))
    assert all(a["extra_logs"]["plaudit_group_size"] == [8.0] for a in answers)
    assert all(a["extra_logs"]["plaudit_failed"] == [0.0] for a in answers)
    diversity = [a["extra_logs"]["plaudit_diversity"][0] for a in answers]
    assert min(diversity) == pytest.approx(0.0) and max(diversity) == pytest.approx(1.0)
    stored = httpx.get(
        f"{live_all_server.url}/v1/runs/orlhf-tcp/groups",
        headers={"Authorization": f"Bearer {live_all_server.reward_key}"},
    ).json()["items"]
    assert len(stored) == 1, "the eight requests were scored as one group"
    texts = [r["id"] for r in stored[0]["result"]["results"]]
    assert len(texts) == 8


def test_openrlhf_training_then_evaluation_on_one_url(live_all_server: LiveServer) -> None:
    """OpenRLHF's evaluation (``--eval.n_samples_per_prompt 4``) goes to the training URL:
    with ``eval_group_size=4`` its groups settle. They would otherwise wait out ``wait_s``
    (600 s here), past this client's 120 s timeout, and the test would fail."""
    spec = quote(json.dumps({"channels": {"diversity": {"weight": 1.0}}}), safe="")
    options = "group_size=8&eval_group_size=4&settle_s=1&wait_s=600&run_id=orlhf-eval"
    url = _with_key(live_all_server, f"/get_reward?{options}&spec={spec}")
    prompts = [PROMPT.replace("fruit", kind) for kind in ("fruit", "tree", "river")]

    def send(job: tuple[str, str]) -> float:
        prompt, answer = job
        body = {"query": [prompt + answer + "<|im_end|>"], "prompts": [prompt], "labels": [None]}
        response = httpx.post(url, json=body, timeout=120)
        assert response.status_code == 200, response.text
        return float(response.json()["extra_logs"]["plaudit_group_size"][0])

    with ThreadPoolExecutor(max_workers=12) as pool:
        training = list(pool.map(send, [(p, a) for p in prompts[:1] for a in ANSWERS]))
        evaluation = list(pool.map(send, [(p, a) for p in prompts[1:] for a in ANSWERS[:4]]))
    assert training == [8.0] * 8
    assert evaluation == [4.0] * 8


def test_slime_sample_over_tcp_and_a_missing_key(live_all_server: LiveServer) -> None:
    body = {"prompt": "Name a fruit.", "response": "Apple.", "label": None}
    data = httpx.post(_with_key(live_all_server, "/slime/reward"), json=body, timeout=120).json()
    assert data["status"] == "ok" and isinstance(data["reward"], float)
    assert 0.0 <= data["score"] <= 1.0 and "judge_scale" in data["channels"]
    refused = httpx.post(f"{live_all_server.url}/slime/reward", json=body, timeout=30)
    assert refused.status_code == 401 and refused.json()["error"]["request_id"]
