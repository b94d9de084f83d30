"""``plaudit eval ...``: measure judges against human judgments."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

eval_app = typer.Typer(help="Measure judges against human judgments.")


@eval_app.command("judge")
def judge(
    data: Annotated[Path, typer.Option(exists=True, dir_okay=False, help="MT-Bench votes JSONL")],
    backend: Annotated[
        str | None, typer.Option(help="local, openai or vllm (default settings)")
    ] = None,
    model: Annotated[str | None, typer.Option(help="judge model (default settings)")] = None,
    base_url: Annotated[str | None, typer.Option(help="openai backend URL")] = None,
    method: Annotated[
        str, typer.Option(help="pairwise (both orders) or scale (grade each answer alone)")
    ] = "pairwise",
    k: Annotated[int, typer.Option(min=2, max=100, help="scale method: grades 1..K")] = 10,
    mode: Annotated[str, typer.Option(help="logprob or generate")] = "logprob",
    swap: Annotated[bool, typer.Option(help="judge both orders")] = True,
    template: Annotated[str | None, typer.Option(help="template name@version")] = None,
    limit: Annotated[int | None, typer.Option(min=1, help="stratified sample size")] = None,
    seed: Annotated[int, typer.Option(help="sample seed")] = 0,
    non_tie_only: Annotated[bool, typer.Option(help="sample only human non-tie votes")] = False,
    max_chars: Annotated[int, typer.Option(min=100, help="truncate each answer")] = 1500,
    max_new_tokens: Annotated[int, typer.Option(min=1, help="generate mode budget")] = 128,
    verdict_fallback: Annotated[
        str, typer.Option(help="generate mode: score (the letter after the reply) or none")
    ] = "score",
    batch: Annotated[int, typer.Option(min=1, help="votes judged concurrently")] = 4,
    out: Annotated[Path | None, typer.Option(help="write the JSON report here")] = None,
) -> None:
    """Agreement of a judge with MT-Bench human votes, with a table and a JSON report."""
    from services.core.settings import get_settings
    from services.judge import evaluation as ev
    from services.judge.schemas import JudgeOptions

    overrides: dict[str, Any] = {
        k: v
        for k, v in {
            "backend": backend,
            "model": model,
            "base_url": base_url,
        }.items()
        if v is not None
    }
    base = get_settings()
    settings = base.with_overrides(**{f"judge_{k}": v for k, v in overrides.items()})
    votes = ev.stratified_sample(ev.load_votes(data), limit, seed, non_tie_only=non_tie_only)
    options = JudgeOptions(
        mode=mode,
        swap=swap,
        template=template,
        max_new_tokens=max_new_tokens,
        verdict_fallback=verdict_fallback,
    )
    started = time.monotonic()
    if method not in ("pairwise", "scale"):
        raise typer.BadParameter("choose pairwise or scale", param_hint="--method")
    config: dict[str, Any] = {
        "data": str(data),
        "backend": settings.judge.backend,
        "model": settings.judge.model,
        "method": method,
        "k": k if method == "scale" else None,
        "mode": mode,
        "swap": swap,
        "template": template,
        "limit": limit,
        "seed": seed,
        "non_tie_only": non_tie_only,
        "max_chars": max_chars,
        "max_new_tokens": max_new_tokens,
        "verdict_fallback": verdict_fallback if mode == "generate" else None,
        "votes": len(votes),
    }

    def checkpoint(done: Any) -> None:  # a long run leaves a partial report behind
        if out is not None:
            partial = {**config, "partial": f"{len(done)} of {len(votes)} votes"}
            partial["seconds"] = round(time.monotonic() - started, 1)
            _write(out, ev.report(done, partial))

    outcomes = asyncio.run(_run(settings, votes, options, max_chars, batch, method, k, checkpoint))
    config["seconds"] = round(time.monotonic() - started, 1)
    rep = ev.report(outcomes, config)
    typer.echo(ev.table(rep))
    if out is not None:
        _write(out, rep)
        typer.echo(f"report written to {out}")


def _write(out: Path, rep: dict[str, Any]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(rep, indent=2))


async def _run(
    settings: Any,
    votes: Any,
    options: Any,
    max_chars: int,
    batch: int,
    method: str,
    k: int,
    checkpoint: Any = None,
) -> Any:
    from services.core.cache import MemoryCache
    from services.judge import evaluation as ev
    from services.judge.backend_factory import make_backend
    from services.judge.cached import CachedJudge
    from services.judge.service import JudgeService

    backend = make_backend(settings)
    await backend.start()
    service = JudgeService(settings.judge, CachedJudge(backend, MemoryCache()), None)
    try:
        with progress(len(votes), "judging votes") as update:
            if method == "scale":
                return await ev.grade_votes(
                    service, votes, k=k, max_chars=max_chars, batch=batch, progress=update
                )
            return await ev.judge_votes(
                service,
                votes,
                options,
                max_chars=max_chars,
                batch=batch,
                progress=update,
                checkpoint=checkpoint,
            )
    finally:
        await backend.aclose()


@contextmanager
def progress(total: int, label: str, every_s: float = 30.0) -> Iterator[Any]:
    """A progress bar on a terminal; elsewhere (CI, ``nohup``, a pipe) a log line at most
    every ``every_s`` seconds and at the end, with the elapsed time and an estimate left."""
    if sys.stdout.isatty():
        with typer.progressbar(length=total, label=label) as bar:
            yield bar.update
        return
    reporter = _LineProgress(total, label, every_s)
    yield reporter.update
    reporter.line()


class _LineProgress:
    def __init__(self, total: int, label: str, every_s: float) -> None:
        self.total, self.label, self.every_s = total, label, every_s
        self.done = 0
        self.started = self.last = time.monotonic()

    def update(self, n: int) -> None:
        self.done += n
        if time.monotonic() - self.last >= self.every_s:
            self.line()

    def line(self) -> None:
        self.last = time.monotonic()
        elapsed = self.last - self.started
        left = elapsed / self.done * (self.total - self.done) if self.done else float("nan")
        typer.echo(
            f"{self.label}: {self.done}/{self.total}, {elapsed:.0f} s elapsed, ~{left:.0f} s left",
            err=True,
        )
