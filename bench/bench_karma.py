"""KARMA scoring: 64 concurrent single-reply ``/v1/karma/score`` requests vs one 64-reply request.

The KARMA app (``services/karma/app.py``) in-process through httpx's ASGI transport, SQLite in a
temp dir, one model stored as ``karma@1``: ``--model DIR`` (a trained KARMA folder) or, by
default, the bundled MiniLM with an untrained head (the speed does not depend on the weights).
Two apps: merging on (the defaults) and off (``max_batch_rows`` 1)::

    OMP_NUM_THREADS=2 python -m bench.bench_karma --repeats 5
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from bench.common import interleaved, machine
from bench.texts import completions

CONTEXT = "How did you pick your major? I like biology and economics and cannot decide."
REQUESTS = 64


def untrained_model(out: Path) -> Path:
    """The bundled MiniLM with a fresh one-output head, written as a KARMA model folder."""
    from plaudit_wire.karma import KarmaTrainConfig
    from services.karma.model import KarmaCard, KarmaModel
    from services.karma.training import _load_base, write_model_dir

    config = KarmaTrainConfig(method="finetune")
    model, tokenizer = _load_base(config)
    card = KarmaCard(
        config.variant, config.max_length, config.min_context, "bundled", config.context_head
    )
    write_model_dir(out, KarmaModel(model, tokenizer, card), {"note": "untrained head"})
    return out


@contextlib.contextmanager
def karma_app(runner: asyncio.Runner, model: Path, **karma: Any) -> Iterator[httpx.AsyncClient]:
    """The KARMA app with ``model`` stored as ``karma@1``, and a client."""
    from services.karma.app import create_app
    from services.karma.service import KIND
    from services.karma.settings import KarmaSettings
    from services.settings import Settings

    settings = Settings(
        data_dir=Path(tempfile.mkdtemp(prefix="plaudit-bench-")),
        karma=KarmaSettings(**karma),
        _env_file=None,
    )
    app = create_app(settings)
    lifespan = app.router.lifespan_context(app)
    runner.run(lifespan.__aenter__())
    store = app.state.resources.artifacts
    runner.run(store.put("karma", KIND, {}, metadata={"variant": "context_only"}, files=model))
    client = httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://bench", timeout=600
    )
    try:
        yield client
    finally:
        runner.run(client.aclose())
        runner.run(lifespan.__aexit__(None, None, None))


def concurrent_vs_one(model: Path, repeats: int) -> dict[str, Any]:
    replies = completions(REQUESTS, seed=23, sentences=2)
    with asyncio.Runner() as runner, contextlib.ExitStack() as stack:
        merged = stack.enter_context(karma_app(runner, model))
        unmerged = stack.enter_context(karma_app(runner, model, max_batch_rows=1))

        async def one(client: httpx.AsyncClient) -> None:
            response = await client.post(
                "/v1/karma/score", json={"context": CONTEXT, "replies": replies}
            )
            response.raise_for_status()

        async def concurrent(client: httpx.AsyncClient) -> None:
            responses = await asyncio.gather(
                *(
                    client.post("/v1/karma/score", json={"context": CONTEXT, "replies": [r]})
                    for r in replies
                )
            )
            for response in responses:
                response.raise_for_status()

        times = interleaved(
            {
                "one": lambda: runner.run(one(merged)),
                "concurrent": lambda: runner.run(concurrent(merged)),
                "concurrent_unmerged": lambda: runner.run(concurrent(unmerged)),
            },
            repeats,
        )
        stats = runner.run(merged.get("/metrics")).text
    return {
        "requests": REQUESTS,
        "one_s": times["one"],
        "concurrent_s": times["concurrent"],
        "concurrent_unmerged_s": times["concurrent_unmerged"],
        "ratio": times["concurrent"] / times["one"],
        "ratio_unmerged": times["concurrent_unmerged"] / times["one"],
        "replies_per_s_one_request": REQUESTS / times["one"],
        "target": "ratio <= 1.5",
        "batch_metrics": [line for line in stats.splitlines() if "model_batch_requests_" in line],
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--model", type=Path, default=None, help="a trained KARMA model folder")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="karma-bench-") as scratch:
        model = args.model or untrained_model(Path(scratch) / "model")
        result = {
            "machine": machine(),
            "model": str(args.model) if args.model else "bundled MiniLM, untrained head",
            "concurrent_vs_one": concurrent_vs_one(model, args.repeats),
        }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
