"""Two ``plaudit serve`` replicas on loopback sharing Postgres and Redis, with OpenRLHF-style
requests alternating between them, as a load balancer would send them (issue 10).

With the per-process buffer each replica would see half of every group and score it partially
at the deadline; with the buffer on Redis every group is gathered whole, scored once and
stored once, and each sample's answer says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from services.core.settings import Settings
from tests.conftest import REDIS_URL, require_services
from tests.jobs.conftest import IDLE_JUDGE, jobs_env, process
from tests.serving import free_port

pytestmark = pytest.mark.slow

SPEC = {"channels": {"diversity": {"weight": 1.0}}}
PROMPTS = [
    f"<|im_start|>user\nName a thing that is {c}.<|im_end|>\n<|im_start|>assistant\n"
    for c in ("red", "round", "loud", "cold")
]
REPLIES = ["An apple.", "A fire truck, bright and loud.", "Blood", "The planet Mars at dusk."]
GROUP = len(REPLIES)


@pytest.fixture
def replicas(tmp_path: Path, pg_migrated: str) -> Iterator[list[str]]:
    require_services()
    settings = Settings(  # type: ignore[call-arg]
        data_dir=tmp_path / "data", database_url=pg_migrated, redis_url=REDIS_URL, _env_file=None
    )
    urls = []
    with contextlib.ExitStack() as stack:
        for name in ("a", "b"):
            port = free_port()
            env = jobs_env(
                settings,
                **IDLE_JUDGE,
                PLAUDIT_PROTOCOLS_GROUP_WAIT_S=os.environ.get("PLAUDIT_TEST_REPLICAS_WAIT_S", "60"),
            )
            # To see the test fail: PLAUDIT_TEST_REPLICAS_SHARED=false (per-process buffers).
            env["PLAUDIT_PROTOCOLS_SHARED_BUFFER"] = os.environ.get(
                "PLAUDIT_TEST_REPLICAS_SHARED", "true"
            )
            argv = ["serve", "all", "--host", "127.0.0.1", "--port", str(port)]
            stack.enter_context(process(argv, env, tmp_path / f"replica-{name}.log"))
            urls.append(f"http://127.0.0.1:{port}")
        _wait_live(urls, tmp_path)
        yield urls


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
    params = {"spec": json.dumps(SPEC), "group_size": GROUP, "run_id": "replicas"}
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
