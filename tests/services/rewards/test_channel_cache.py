"""``PLAUDIT_JUDGE_CHANNEL_CACHE=false`` keeps the judge's reward channels out of the judge
cache (issue 19: the rewards route always cached, so training traffic, whose sampled
completions rarely repeat, paid a key and a store per judged prompt and filled the cache)."""

from __future__ import annotations

import httpx
import pytest

from services.app import create_app
from services.core.cache import MemoryCache
from services.core.models.embedder import Embedder
from services.settings import Settings
from tests.services.judge.scripted import ScriptedBackend

GROUP = {
    "prompt": "Q?",
    "completions": ["GOOD one", "two", "three"],
    "spec": {"channels": {"judge_pairwise": {}, "judge_scale": {"k": 5}}},
}


@pytest.mark.parametrize("channel_cache", [True, False])
async def test_the_channels_use_the_judge_cache_only_when_asked(
    channel_cache: bool, embedded_settings: Settings, embedder: Embedder
) -> None:
    cache = MemoryCache()
    settings = embedded_settings.with_overrides(judge_channel_cache=channel_cache)
    app = create_app(settings, embedder=embedder, cache=cache, judge_backend=ScriptedBackend())
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            scored = await client.post("/v1/rewards/group", json=GROUP)
        verdicts = [key for key in cache._data if key.startswith("judge:")]  # before close
    assert scored.status_code == 200, scored.text
    assert all(r["total"] is not None for r in scored.json()["results"])
    # 3 completions, adjacent pairing: 2 pairs asked in both orders, and 3 grades
    assert len(verdicts) == (7 if channel_cache else 0)
