"""The embedder on the shared model worker, with the real all-MiniLM-L6-v2."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest

from services.core.errors import BackendUnavailable, InvalidInput
from services.core.metrics import Metrics
from services.core.models.embedder import BatchedEmbedder, Embedder

TEXTS = [
    "The cat sat on the mat.",
    "A dog slept by the door.",
    "Stock prices fell sharply on Monday.",
    "Quantum computers use qubits.",
    "She baked bread for the neighbours.",
    "Rain is expected this afternoon.",
]


async def test_concurrent_calls_share_forward_passes_and_match_alone(embedder: Embedder) -> None:
    metrics = Metrics()
    batched = BatchedEmbedder(embedder, max_wait=0.05, metrics=metrics)
    assert batched.ready, "a model passed in is ready at once"
    groups = [TEXTS[i : i + 2] for i in range(0, len(TEXTS), 2)]
    merged = await asyncio.gather(*(batched.embed(g) for g in groups))
    stats = batched.worker.stats
    assert stats.batches == 1 and stats.requests == 3 and stats.rows == 6
    for group, vectors in zip(groups, merged, strict=True):
        alone = embedder.embed(group)
        assert np.allclose(vectors, alone, atol=1e-5)
    text = metrics.render().decode()
    assert 'plaudit_model_batch_requests_sum{model="embedder"} 3.0' in text
    assert 'plaudit_model_batch_size_sum{model="embedder"} 6.0' in text
    await batched.aclose()


async def test_a_request_the_model_rejects_fails_alone(embedder: Embedder) -> None:
    batched = BatchedEmbedder(embedder, max_wait=0.05)
    good, bad = await asyncio.gather(
        batched.embed(TEXTS[:2]),
        batched.embed([TEXTS[2], None]),  # type: ignore[list-item]
        return_exceptions=True,
    )
    assert isinstance(bad, BackendUnavailable)
    assert isinstance(good, np.ndarray) and good.shape == (2, 384)
    assert batched.worker.stats.batches == 3, "merged call, then each request alone"
    await batched.aclose()


async def test_a_model_that_cannot_load_says_why(tmp_path: Path) -> None:
    batched = BatchedEmbedder(model=str(tmp_path / "no-such-model"))
    await asyncio.gather(batched.start(), return_exceptions=True)
    readiness = batched.readiness
    assert readiness.state == "failed" and "no-such-model" in (readiness.reason or "")
    with pytest.raises(BackendUnavailable, match="embedder failed to load") as info:
        await batched.embed(["hello"])
    assert info.value.retry_after is None, "a failed load does not come back by itself"
    await batched.aclose()
    assert batched.readiness.state == "closed"


async def test_a_lone_surrogate_is_refused_before_it_joins_a_batch(embedder: Embedder) -> None:
    batched = BatchedEmbedder(embedder, max_wait=0.05)
    good, bad = await asyncio.gather(
        batched.embed(TEXTS[:2]),
        batched.embed([TEXTS[2], "bad \ud800 text"]),
        return_exceptions=True,
    )
    assert isinstance(bad, InvalidInput) and "surrogate" in bad.message
    assert isinstance(good, np.ndarray) and good.shape == (2, 384)
    assert batched.worker.stats.batches == 1 and batched.worker.stats.requests == 1
    await batched.aclose()
