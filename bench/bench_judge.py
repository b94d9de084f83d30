"""Judge benchmarks (issue 3), on the embedded judge unless settings name another backend.

1. 32 pairs with swap vs one order (one batched backend call each): time ratio, target <= 2.1.
2. logprob verdicts vs generated verdicts on the same pairs: time ratio.
3. A repeated group: cache miss vs cache hit.
4. /v1/judge/group, G=8 round robin: over HTTP (`plaudit serve judge`) vs the service object
   in-process, cache off: time ratio.
5. Shared-prompt-prefix reuse off vs on (a second backend with judge_prefix_min_tokens=0):
   benchmark 1 both ways in one interleaved run, and a G=8 round-robin group (56 prompts).
6. Merging concurrent requests (issue 8): 8 concurrent /v1/judge/scale requests of G=8 vs one
   request of G=64 on the same 64 texts, through the judge app (httpx ASGI transport, cache
   off), target <= 1.3; and the 8 requests again on an app with merging off
   (judge_batch_max_rows=1), for reference.

Run: .venv/bin/python -m bench.bench_judge [--repeats N] [--pairs 32]
     [--only swap,generate,cache,http,prefix,merge]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx

from bench.common import interleaved, machine, plaudit_server
from bench.texts import completions
from plaudit_wire.judge import GroupRequest, JudgeOptions
from plaudit_wire.schemas import CompletionItem
from services.core.cache import MemoryCache
from services.core.models.cached_judge import CachedJudge
from services.core.models.layer import model_backend
from services.judge.service import JudgeService
from services.judge.settings import JudgeSettings
from services.settings import get_settings

QUESTION = "Explain in one or two sentences what the assistant computed."
SECTIONS = ("swap", "generate", "cache", "http", "prefix", "merge")
MERGE_GROUPS = 8


def _service(backend: Any, cache: MemoryCache | None = None) -> JudgeService:
    return JudgeService(
        JudgeSettings.of(get_settings()), CachedJudge(backend, cache or MemoryCache()), None
    )


def _pair_runner(service: JudgeService, pairs: int) -> Callable[[JudgeOptions], None]:
    """Judge the same ``pairs`` pairs under given options (one batched backend call)."""
    texts = completions(2 * pairs, seed=7, sentences=1)
    pair_texts = [(texts[2 * i], texts[2 * i + 1]) for i in range(pairs)]

    def run(options: JudgeOptions) -> None:
        template = service.template_for(options)
        asyncio.run(service.judge_pairs(template, QUESTION, pair_texts, options))

    return run


def swap_ratio(service: JudgeService, pairs: int, repeats: int) -> dict[str, Any]:
    run = _pair_runner(service, pairs)
    times = interleaved(
        {
            "swap": lambda: run(JudgeOptions(cache=False)),
            "single": lambda: run(JudgeOptions(cache=False, swap=False)),
        },
        repeats,
    )
    return {
        "pairs": pairs,
        "swap_s": times["swap"],
        "single_s": times["single"],
        "swap_ratio": times["swap"] / times["single"],
    }


def generate_ratio(service: JudgeService, pairs: int, repeats: int) -> dict[str, Any]:
    run = _pair_runner(service, pairs)
    times = interleaved(
        {
            "logprob": lambda: run(JudgeOptions(cache=False, swap=False)),
            "generate": lambda: run(
                JudgeOptions(cache=False, swap=False, mode="generate", max_new_tokens=64)
            ),
        },
        repeats,
    )
    return {
        "pairs": pairs,
        "logprob_s": times["logprob"],
        "generate_s": times["generate"],
        "generate_ratio": times["generate"] / times["logprob"],
    }


def prefix_sharing(
    shared: JudgeService, unshared: JudgeService, pairs: int, repeats: int
) -> dict[str, Any]:
    """Benchmark 1 and a G=8 round-robin group, prefix reuse on and off, interleaved."""
    group = GroupRequest(
        prompt=QUESTION,
        completions=[CompletionItem(text=t) for t in completions(8, seed=13, sentences=1)],
        pairing="round_robin",
        cache=False,
    )
    fns: dict[str, Callable[[], Any]] = {}
    for name, service in (("on", shared), ("off", unshared)):
        run = _pair_runner(service, pairs)
        fns[f"swap_{name}"] = functools.partial(run, JudgeOptions(cache=False))
        fns[f"single_{name}"] = functools.partial(run, JudgeOptions(cache=False, swap=False))
        fns[f"group_{name}"] = functools.partial(_run_group, service, group)
    times = interleaved(fns, repeats)
    return {
        "pairs": pairs,
        **{f"{name}_s": value for name, value in times.items()},
        "swap_ratio_on": times["swap_on"] / times["single_on"],
        "swap_ratio_off": times["swap_off"] / times["single_off"],
        "swap_speedup": times["swap_off"] / times["swap_on"],
        "single_speedup": times["single_off"] / times["single_on"],
        "group_speedup": times["group_off"] / times["group_on"],
    }


def _run_group(service: JudgeService, request: GroupRequest) -> None:
    asyncio.run(service.group(request))


def cache_hit_vs_miss(backend: Any) -> dict[str, Any]:
    texts = completions(8, seed=11, sentences=1)
    request = GroupRequest(prompt=QUESTION, completions=[CompletionItem(text=t) for t in texts])
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


def merge_ratio(repeats: int, group_size: int = 8) -> dict[str, Any]:
    """8 concurrent scale requests of G vs one of 8*G, through the app, merging on and off."""
    texts = completions(MERGE_GROUPS * group_size, seed=17, sentences=1)
    body = {"prompt": QUESTION, "k": 5, "cache": False}
    groups = [texts[i : i + group_size] for i in range(0, len(texts), group_size)]
    with asyncio.Runner() as runner, contextlib.ExitStack() as stack:
        merged = stack.enter_context(_judge_app(runner, judge_batch_max_rows=len(texts)))
        unmerged = stack.enter_context(_judge_app(runner, judge_batch_max_rows=1))

        async def one_request() -> None:
            response = await merged.post("/v1/judge/scale", json={**body, "completions": texts})
            response.raise_for_status()

        async def concurrent(client: httpx.AsyncClient) -> None:
            responses = await asyncio.gather(
                *(client.post("/v1/judge/scale", json={**body, "completions": g}) for g in groups)
            )
            for response in responses:
                response.raise_for_status()

        times = interleaved(
            {
                "one": lambda: runner.run(one_request()),
                "concurrent": lambda: runner.run(concurrent(merged)),
                "concurrent_unmerged": lambda: runner.run(concurrent(unmerged)),
            },
            repeats,
        )
        stats = runner.run(merged.get("/metrics")).text
    return {
        "requests": MERGE_GROUPS,
        "group_size": group_size,
        "one_s": times["one"],
        "concurrent_s": times["concurrent"],
        "concurrent_unmerged_s": times["concurrent_unmerged"],
        "ratio": times["concurrent"] / times["one"],
        "ratio_unmerged": times["concurrent_unmerged"] / times["one"],
        "batch_metrics": [line for line in stats.splitlines() if "model_batch_requests_" in line],
    }


@contextlib.contextmanager
def _judge_app(runner: asyncio.Runner, **overrides: Any) -> Iterator[httpx.AsyncClient]:
    """The judge app on its own started backend (SQLite in a temp dir), with a client."""
    from services.judge.app import create_app

    data_dir = tempfile.mkdtemp(prefix="plaudit-bench-")
    settings = get_settings().model_copy(
        update={"data_dir": Path(data_dir), "judge_max_group_size": 64, **overrides}
    )
    app = create_app(settings)
    lifespan = app.router.lifespan_context(app)
    runner.run(lifespan.__aenter__())
    client = httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://bench", timeout=600
    )
    try:
        runner.run(_wait_ready(client))
        yield client
    finally:
        runner.run(client.aclose())
        runner.run(lifespan.__aexit__(None, None, None))


async def _wait_ready(client: httpx.AsyncClient) -> None:
    while (await client.get("/health/ready")).status_code != 200:
        await asyncio.sleep(0.2)


async def _started_backend(**overrides: Any) -> Any:
    settings = get_settings().with_overrides(**overrides)
    backend = model_backend(settings, "judge", JudgeSettings.of(settings))
    await backend.start()
    return backend


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--pairs", type=int, default=32)
    parser.add_argument(
        "--only", default=",".join(SECTIONS), help=f"comma-separated subset of {SECTIONS}"
    )
    args = parser.parse_args()
    only = set(args.only.split(","))
    if only - set(SECTIONS):
        parser.error(f"unknown sections {sorted(only - set(SECTIONS))}")
    result: dict[str, Any] = {"machine": machine()}
    if only == {"merge"}:  # the apps load their own backends
        result["merge"] = merge_ratio(args.repeats)
        print(json.dumps(result, indent=2))
        return
    backend = asyncio.run(_started_backend())
    service = _service(backend)
    result.update(backend=backend.info.name, model=backend.info.model_id)
    if "swap" in only:
        result["swap"] = swap_ratio(service, args.pairs, args.repeats)
    if "generate" in only:
        result["generate"] = generate_ratio(service, args.pairs, max(1, args.repeats - 1))
    if "cache" in only:
        result["cache"] = cache_hit_vs_miss(backend)
    if "http" in only:
        result["group_http_vs_in_process"] = http_vs_in_process(backend, args.repeats)
    if "prefix" in only:
        unshared = _service(asyncio.run(_started_backend(judge_prefix_min_tokens=0)))
        result["prefix_sharing"] = prefix_sharing(service, unshared, args.pairs, args.repeats)
    if "merge" in only:
        result["merge"] = merge_ratio(args.repeats)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
