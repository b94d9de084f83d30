"""Judge benchmarks (issue 3), on the embedded judge unless settings name another backend.

1. 32 pairs with swap vs one order (one batched backend call each): time ratio, target <= 2.1.
2. logprob verdicts vs generated verdicts on the same pairs: time ratio.
3. A repeated group: cache miss vs cache hit.
4. /v1/judge/group, G=8 round robin: over HTTP (`plaudit serve judge`) vs the service object
   in-process, cache off: time ratio.

Run: .venv/bin/python -m bench.bench_judge [--repeats N] [--pairs 32]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

import httpx

from bench.common import interleaved, machine, plaudit_server
from bench.texts import completions
from services.core.cache import MemoryCache
from services.core.settings import get_settings
from services.judge.backend_factory import make_backend
from services.judge.cached import CachedJudge
from services.judge.schemas import GroupRequest, JudgeOptions
from services.judge.service import JudgeService

QUESTION = "Explain in one or two sentences what the assistant computed."


def _service(backend: Any, cache: MemoryCache | None = None) -> JudgeService:
    return JudgeService(get_settings(), CachedJudge(backend, cache or MemoryCache()), None)


def swap_and_modes(service: JudgeService, pairs: int, repeats: int) -> dict[str, Any]:
    texts = completions(2 * pairs, seed=7, sentences=1)
    pair_texts = [(texts[2 * i], texts[2 * i + 1]) for i in range(pairs)]
    template = service.template_for(JudgeOptions())
    gen_template = service.template_for(JudgeOptions(mode="generate"))

    def run(options: JudgeOptions, tmpl: Any) -> None:
        asyncio.run(service.judge_pairs(tmpl, QUESTION, pair_texts, options))

    times = interleaved(
        {
            "swap": lambda: run(JudgeOptions(cache=False), template),
            "single": lambda: run(JudgeOptions(cache=False, swap=False), template),
        },
        repeats,
    )
    gen = interleaved(
        {
            "logprob": lambda: run(JudgeOptions(cache=False, swap=False), template),
            "generate": lambda: run(
                JudgeOptions(cache=False, swap=False, mode="generate", max_new_tokens=64),
                gen_template,
            ),
        },
        max(1, repeats - 1),
    )
    return {
        "pairs": pairs,
        "swap_s": times["swap"],
        "single_s": times["single"],
        "swap_ratio": times["swap"] / times["single"],
        "logprob_s": gen["logprob"],
        "generate_s": gen["generate"],
        "generate_ratio": gen["generate"] / gen["logprob"],
    }


def cache_hit_vs_miss(backend: Any) -> dict[str, Any]:
    request = GroupRequest(prompt=QUESTION, completions=completions(8, seed=11, sentences=1))
    cache = MemoryCache()
    service = _service(backend, cache)
    start = time.perf_counter()
    asyncio.run(service.group(request))
    miss = time.perf_counter() - start
    hits = []
    for _ in range(5):
        start = time.perf_counter()
        asyncio.run(service.group(request))
        hits.append(time.perf_counter() - start)
    hit = sorted(hits)[len(hits) // 2]
    return {"miss_s": miss, "hit_s": hit, "speedup": miss / hit}


def http_vs_in_process(backend: Any, repeats: int) -> dict[str, Any]:
    body = {
        "prompt": QUESTION,
        "completions": completions(8, seed=13, sentences=1),
        "pairing": "round_robin",
        "cache": False,
    }
    service = _service(backend)
    request = GroupRequest.model_validate(body)
    with plaudit_server("judge") as base:
        client = httpx.Client(base_url=base, timeout=600)

        def over_http() -> None:
            client.post("/v1/judge/group", json=body).raise_for_status()

        times = interleaved(
            {"http": over_http, "in_process": lambda: asyncio.run(service.group(request))},
            repeats,
        )
        client.close()
    return {**times, "ratio": times["http"] / times["in_process"]}


async def _started_backend() -> Any:
    backend = make_backend(get_settings())
    start = getattr(backend, "start", None)
    if start is not None:
        await start()
    return backend


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--pairs", type=int, default=32)
    args = parser.parse_args()
    backend = asyncio.run(_started_backend())
    service = _service(backend)
    result = {
        "machine": machine(),
        "backend": backend.info.name,
        "model": backend.info.model_id,
        "swap_and_modes": swap_and_modes(service, args.pairs, args.repeats),
        "cache": cache_hit_vs_miss(backend),
        "group_http_vs_in_process": http_vs_in_process(backend, args.repeats),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
