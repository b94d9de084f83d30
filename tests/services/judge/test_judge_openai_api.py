"""The judge service over the OpenAI-compatible backend and a real loopback stand-in server
(tests/judges/openai_standin.py): what a server's missing capability does to one call's
answer (issue 19). Each test failed before issue 19's fixes: a reply without logprobs was
stamped ``logprob`` and cached, a context-length 400 was a 503, a grade of 10 was unreadable.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from judges.backends.base import user
from judges.backends.convert import resolve_model_dir
from judges.backends.openai_backend import OpenAIBackend, OpenAIConfig
from judges.backends.sequence_scoring import ChatTokenizer
from services.app import create_app
from services.core.models.embedder import Embedder
from services.settings import Settings
from tests.judges.openai_standin import MODEL, Run, StandIn, stand_in_server

PAIR = {"prompt": "What is 2 + 2?", "response_a": "4", "response_b": "5"}


@pytest.fixture(scope="module")
def stand_in() -> Iterator[StandIn]:
    with stand_in_server() as server:
        yield server


class Judge:
    """An app whose judge is the stand-in under one behaviour, and what the stand-in saw."""

    def __init__(self, server: StandIn, behaviour: str) -> None:
        self.run_id = uuid.uuid4().hex[:12]
        self.run: Run = server.runs.setdefault(self.run_id, Run())
        self.url = server.url(behaviour, self.run_id)


async def serve(
    judge: Judge, tmp_path: Path, embedder: Embedder, **backend: Any
) -> AsyncIterator[httpx.AsyncClient]:
    if isinstance(backend.get("tokenizer"), ChatTokenizer):  # vLLM tokenizes text prompts so
        judge.run.tokenize = backend["tokenizer"].encode
    openai = OpenAIBackend(OpenAIConfig(judge.url, MODEL), **backend)
    settings = Settings(data_dir=tmp_path / "data", _env_file=None)  # type: ignore[call-arg]
    app = create_app(settings, embedder=embedder, judge_backend=openai)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://plaudit.test") as c:
            yield c
    await openai.aclose()


async def test_a_reply_without_logprobs_is_stamped_counted_and_not_cached(
    stand_in: StandIn, tmp_path: Path, embedder: Embedder
) -> None:
    judge = Judge(stand_in, "null-logprobs")
    async for client in serve(judge, tmp_path, embedder):
        first = (await client.post("/v1/judge/pairwise", json=PAIR)).json()
        second = (await client.post("/v1/judge/pairwise", json=PAIR)).json()
        metrics = (await client.get("/metrics")).text
    for body in (first, second):
        assert [o["verdict_source"] for o in body["orders"]] == ["parsed", "parsed"]
        assert body["judge"]["mode"] == "generate" and body["judge"]["verdict_source"] == "parsed"
        assert [o["p_first"] for o in body["orders"]] == [0.0, 0.0]  # "Verdict: [[B]]" twice
    # Not cached: the second request asked the server again, for logprobs first.
    asked = [bool(b.get("logprobs")) for b in judge.run.bodies]
    assert asked.count(True) == 4 and asked.count(False) == 4
    assert "plaudit_judge_verdict_fallback_total 4.0" in metrics


async def test_logprob_answers_say_logprob(
    stand_in: StandIn, tmp_path: Path, embedder: Embedder
) -> None:
    judge = Judge(stand_in, "proper")
    async for client in serve(judge, tmp_path, embedder):
        body = (await client.post("/v1/judge/pairwise", json=PAIR)).json()
    assert [o["verdict_source"] for o in body["orders"]] == ["logprob", "logprob"]
    assert body["judge"]["mode"] == "logprob" and body["judge"]["verdict_source"] == "logprob"
    assert body["judge"]["choice_scoring"] == "first_token"


async def test_a_context_length_error_is_a_422(
    stand_in: StandIn, tmp_path: Path, embedder: Embedder
) -> None:
    judge = Judge(stand_in, "context-length")
    long = {**PAIR, "response_a": "four " * 500}
    async for client in serve(judge, tmp_path, embedder):
        refused = await client.post("/v1/judge/pairwise", json=long)
        fine = await client.post("/v1/judge/pairwise", json=PAIR)
    assert refused.status_code == 422, refused.text
    assert "maximum context length" in refused.json()["error"]["message"]
    assert fine.status_code == 200
    assert len(judge.run.bodies) == 4  # one attempt per order: a 400 is never retried


async def test_a_judge_that_fails_every_item_is_a_503_with_retry_after(
    stand_in: StandIn, tmp_path: Path, embedder: Embedder
) -> None:
    judge = Judge(stand_in, "fail500x1000")
    async for client in serve(judge, tmp_path, embedder):
        response = await client.post("/v1/judge/pairwise", json=PAIR)
    assert response.status_code == 503, response.text
    assert response.json()["error"]["type"] == "backend_unavailable"
    assert int(response.headers["Retry-After"]) >= 1  # was missing: the caller had no time


async def test_a_grade_of_ten_reads_through_the_scale_endpoint(
    stand_in: StandIn, tmp_path: Path, embedder: Embedder, model_cache_dir: Path
) -> None:
    tokenizer = ChatTokenizer.load(str(resolve_model_dir(None, model_cache_dir)))
    judge = Judge(stand_in, "proper")
    opened = tokenizer.prompt_ids([user("x")])[-1]  # every prompt ends with the open turn
    one, zero = tokenizer.candidate_ids("1")[0], tokenizer.candidate_ids("0")[0]
    end = tokenizer.end_id
    judge.run.pair_logprobs.update(
        {(opened, one): -0.1, (one, zero): -0.05, (zero, end): -0.01, (one, end): -4.0}
    )
    request = {"prompt": "Capital of France?", "completions": ["Paris"] * 8, "k": 10}
    async for client in serve(judge, tmp_path, embedder, tokenizer=tokenizer):
        body = (await client.post("/v1/judge/scale", json=request)).json()
    assert [r["mode"] for r in body["results"]] == [10] * 8
    assert body["judge"]["choice_scoring"] == "sequence"
    assert body["judge"]["verdict_source"] == "logprob"
    assert len(judge.run.completions) == 1 and judge.run.bodies == []  # 80 rows, one call


async def test_a_prose_verdict_from_a_server_that_ignores_the_schema_is_parsed(
    stand_in: StandIn, tmp_path: Path, embedder: Embedder
) -> None:
    judge = Judge(stand_in, "prose-verdict")
    async for client in serve(judge, tmp_path, embedder):
        body = (await client.post("/v1/judge/pairwise", json={**PAIR, "mode": "generate"})).json()
    assert [o["verdict_source"] for o in body["orders"]] == ["parsed", "parsed"]
    assert [o["p_first"] for o in body["orders"]] == [1.0, 1.0]  # "[[A]]" in both orders
    assert body["winner"] == "tie" and body["consistent"] is False
    # Parsed, not scored by appending '", "verdict": "' to the prose and asking for logprobs.
    assert all("response_format" in sent for sent in judge.run.bodies)
    assert len(judge.run.bodies) == 2


async def test_a_g8_round_robin_tournament_is_one_http_call(
    stand_in: StandIn, tmp_path: Path, embedder: Embedder, model_cache_dir: Path
) -> None:
    tokenizer = ChatTokenizer.load(str(resolve_model_dir(None, model_cache_dir)))
    judge = Judge(stand_in, "proper")
    opened = tokenizer.prompt_ids([user("x")])[-1]
    for rank, letter in enumerate("ABCDEFGHIJKLMNOPQRSTUVWXYZ"):  # whichever labels it picks
        [token] = tokenizer.candidate_ids(letter)
        judge.run.token_text[token] = letter
        judge.run.pair_logprobs[(opened, token)] = -0.5 - rank / 10
    group = {
        "prompt": "Name a prime number.",
        "completions": [str(n) for n in (2, 3, 5, 7, 11, 13, 17, 19)],
        "pairing": "round_robin",
    }
    async for client in serve(judge, tmp_path, embedder, tokenizer=tokenizer):
        response = await client.post("/v1/judge/group", json=group)
    assert response.status_code == 200, response.text
    assert response.json()["status"] == ["ok"] * 8
    # Issue 19's target is <= 4 calls for this tournament (it was 56, one per order).
    [call] = judge.run.completions
    assert len(call["prompt"]) == 56 and judge.run.bodies == []
    assert call["prompt"] == sorted(call["prompt"])  # shared heads reach the cache together
