"""Two ``plaudit serve`` replicas on loopback sharing Postgres and Redis, with OpenRLHF-style
requests alternating between them, as a load balancer would send them (issue 10).

With the per-process buffer each replica would see half of every group and score it partially
at the deadline; with the buffer on Redis every group is gathered whole, scored once and
stored once, and each sample's answer says so.

The judge is shared too. With an ``openai`` judge (the stand-in server of
tests/judges/openai_standin.py, in this process) both replicas read and fill one judge cache
on Redis, so a request judged by one is answered from the cache by the other without calling
the judge server; and both take their judge calls from one Redis limiter, so the judge server
never sees more requests at once than ``PLAUDIT_JUDGE_MAX_CONCURRENCY``, not that many per
replica.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from services.settings import Settings
from tests.judges.openai_standin import (
    FAVOURED_GRADE,
    MODEL,
    Run,
    StandIn,
    stand_in_server,
)
from tests.services.core.jobs.conftest import IDLE_JUDGE, jobs_env, process
from tests.serving import free_port

pytestmark = pytest.mark.slow

SPEC = {"channels": {"diversity": {"weight": 1.0}}}
PROMPTS = [
    f"<|im_start|>user\nName a thing that is {c}.<|im_end|>\n<|im_start|>assistant\n"
    for c in ("red", "round", "loud", "cold")
]
REPLIES = ["An apple.", "A fire truck, bright and loud.", "Blood", "The planet Mars at dusk."]
GROUP = len(REPLIES)


@contextlib.contextmanager
def running_replicas(settings: Settings, logs: Path, **judge: str) -> Iterator[list[str]]:
    """Two ``plaudit serve all`` on loopback sharing ``settings``' Postgres and Redis, with the
    judge that ``judge`` configures; yields their URLs once both answer."""
    urls = []
    with contextlib.ExitStack() as stack:
        for name in ("a", "b"):
            port = free_port()
            env = jobs_env(
                settings,
                **judge,
                PLAUDIT_PROTOCOLS_GROUP_WAIT_S=os.environ.get("PLAUDIT_TEST_REPLICAS_WAIT_S", "60"),
            )
            # To see the group test fail: PLAUDIT_TEST_REPLICAS_SHARED=false (per-process
            # buffers).
            env["PLAUDIT_PROTOCOLS_SHARED_BUFFER"] = os.environ.get(
                "PLAUDIT_TEST_REPLICAS_SHARED", "true"
            )
            argv = ["serve", "all", "--host", "127.0.0.1", "--port", str(port)]
            stack.enter_context(process(argv, env, logs / f"replica-{name}.log"))
            urls.append(f"http://127.0.0.1:{port}")
        _wait_live(urls, logs)
        yield urls


@pytest.fixture
def replicas(tmp_path: Path, deployed_settings: Settings) -> Iterator[list[str]]:
    """Two replicas whose judge is never called (the group test's diversity channel)."""
    with running_replicas(deployed_settings, tmp_path, **IDLE_JUDGE) as urls:
        yield urls


@dataclass
class JudgedReplicas:
    """Two replicas judging with the stand-in, and what the stand-in saw of their calls."""

    urls: list[str]
    stand_in: StandIn
    run_id: str

    @property
    def seen(self) -> Run:
        return self.stand_in.run(self.run_id)

    @property
    def calls(self) -> int:
        """Chat completions the stand-in has answered for these replicas so far."""
        return len(self.seen.bodies)


@pytest.fixture
def stand_in() -> Iterator[StandIn]:
    with stand_in_server() as server:
        yield server


@pytest.fixture
def judged_replicas(
    tmp_path: Path, deployed_settings: Settings, stand_in: StandIn
) -> Iterator[JudgedReplicas]:
    """Two replicas whose ``openai`` judge is the stand-in, answering after 0.3 s ("slower",
    so that calls from the two replicas would overlap unless a shared limit keeps them
    apart), one call at a time."""
    run_id = uuid.uuid4().hex[:12]  # also names the shared limiter's keys (its base URL)
    # jobs_env gives both the same PLAUDIT_JUDGE_FENCE_SECRET, as replicas sharing a judge
    # cache need: with a random one each, their prompts (and cache keys) would differ.
    judge = {
        "PLAUDIT_JUDGE_BACKEND": "openai",
        "PLAUDIT_JUDGE_BASE_URL": stand_in.url("slower", run_id),
        "PLAUDIT_JUDGE_MODEL": MODEL,
        "PLAUDIT_JUDGE_MAX_CONCURRENCY": "1",
    }
    with running_replicas(deployed_settings, tmp_path, **judge) as urls:
        yield JudgedReplicas(urls, stand_in, run_id)


def _wait_live(urls: list[str], logs: Path, within: float = 300.0) -> None:
    deadline = time.monotonic() + within
    for url in urls:
        while True:
            try:
                if httpx.get(url + "/health/live", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                text = "\n".join(p.read_text() for p in sorted(logs.glob("replica-*.log")))
                pytest.fail(f"a replica never came up:\n{text[-4000:]}")
            time.sleep(0.5)


async def test_two_replicas_complete_every_group(replicas: list[str]) -> None:
    params: dict[str, str | int | float] = {
        "spec": json.dumps(SPEC),
        "group_size": GROUP,
        "run_id": "replicas",
    }
    bodies = [
        {"query": [prompt + reply + "<|im_end|>"], "prompts": [prompt], "labels": [None]}
        for prompt in PROMPTS
        for reply in REPLIES
    ]
    async with httpx.AsyncClient(timeout=120) as client:

        async def send(i: int, body: dict[str, Any]) -> dict[str, Any]:
            url = replicas[i % 2] + "/get_reward"  # round robin, as a load balancer
            response = await client.post(url, json=body, params=params)
            assert response.status_code == 200, response.text
            data: dict[str, Any] = response.json()
            return data

        answers = await asyncio.gather(*(send(i, b) for i, b in enumerate(bodies)))
        for answer in answers:
            assert answer["extra_logs"]["plaudit_group_size"] == [float(GROUP)], answer
            assert answer["statuses"] == ["ok"]
        for p in range(len(PROMPTS)):
            spread = sorted(a["rewards"][0] for a in answers[p * GROUP : (p + 1) * GROUP])
            assert spread[0] == 0.0 and spread[-1] == 1.0, "min-max over the whole group"
        page = (await client.get(replicas[0] + "/v1/runs/replicas/groups")).json()
        assert page["total"] == len(PROMPTS), "each group scored and stored once"
        assert all(len(g["result"]["results"]) == GROUP for g in page["items"])

        # Then an evaluation on the same URL, 2 samples per prompt: each group settles on
        # whichever replica brought it to 2 (waiting out wait_s would time this client out).
        params.update(eval_group_size=2, settle_s=0.5, wait_s=600, run_id="replicas-eval")
        evaluation = await asyncio.gather(
            *(send(i, b) for i, b in enumerate(bodies) if i % GROUP < 2)
        )
        assert [a["extra_logs"]["plaudit_group_size"] for a in evaluation] == [[2.0]] * 8
        page = (await client.get(replicas[1] + "/v1/runs/replicas-eval/groups")).json()
        assert page["total"] == len(PROMPTS), "each evaluation group scored once"


SCALE: dict[str, Any] = {
    "prompt": "Name a thing that is green.",
    "completions": ["A leaf.", "Grass, after the rain.", "Envy, some say."],
    "k": 5,
}


async def test_the_judge_cache_is_shared(judged_replicas: JudgedReplicas) -> None:
    a, b = judged_replicas.urls
    async with httpx.AsyncClient(timeout=120) as client:
        first = await _post(client, a + "/v1/judge/scale", SCALE)
        called = judged_replicas.calls
        assert called == len(SCALE["completions"]), "replica A asked the judge once per item"
        again = await _post(client, b + "/v1/judge/scale", SCALE)
        assert judged_replicas.calls == called, "replica B answered from the cache"
        assert again["results"] == first["results"]
        for result in first["results"]:
            assert result["status"] == "ok" and result["mode"] == FAVOURED_GRADE, result
        assert await _cache_counts(client, a) == {"miss": called}
        assert await _cache_counts(client, b) == {"hit": called}

        # The same through the trainer protocol: OpenRLHF's /get_reward with a judge channel.
        spec = {"channels": {"judge_scale": {"weight": 1.0, "k": 5}}}
        prompt = "<|im_start|>user\nName a thing that is blue.<|im_end|>\n<|im_start|>assistant\n"
        body = {"query": [prompt + "The sea.<|im_end|>"], "prompts": [prompt], "labels": [None]}
        params = {"spec": json.dumps(spec)}
        rewards = [await _post(client, url + "/get_reward", body, params=params) for url in (a, b)]
    assert judged_replicas.calls == called + 1, "one judge call for both replicas"
    assert rewards[0]["statuses"] == ["ok"] and rewards[0]["rewards"] == rewards[1]["rewards"]


async def test_the_judge_limits_are_shared(judged_replicas: JudgedReplicas) -> None:
    bodies = [
        {**SCALE, "prompt": f"Name a thing that is green, number {i}.", "completions": [reply]}
        for i in range(4)
        for reply in ("A leaf.", "A frog.")
    ]
    async with httpx.AsyncClient(timeout=120) as client:
        answers = await asyncio.gather(
            *(
                _post(client, judged_replicas.urls[i % 2] + "/v1/judge/scale", body)
                for i, body in enumerate(bodies)
            )
        )
    assert all(r["status"] == "ok" for answer in answers for r in answer["results"])
    assert judged_replicas.calls == len(bodies)
    # Each replica alone would allow one call in flight; two replicas would make it two.
    peak = judged_replicas.seen.peak
    assert peak == 1, f"{peak} judge calls in flight at once, the limit is 1"


async def _post(
    client: httpx.AsyncClient, url: str, body: dict[str, Any], **kwargs: Any
) -> dict[str, Any]:
    response = await client.post(url, json=body, **kwargs)
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()
    return data


async def _cache_counts(client: httpx.AsyncClient, url: str) -> dict[str, float]:
    """A replica's judge cache lookups by outcome, from its Prometheus metrics (zeros left out)."""
    text = (await client.get(url + "/metrics")).text
    found = re.findall(r'^plaudit_judge_cache_total\{outcome="(\w+)"\} (\S+)$', text, re.M)
    return {outcome: float(count) for outcome, count in found if float(count)}
