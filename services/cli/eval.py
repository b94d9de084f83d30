"""``plaudit eval ...``: measure judges against human judgments.

Without ``--server`` the judge runs in this process (built from settings and the options);
with ``--server URL`` the evaluation runs on that server as a job, so it measures the judge
the server actually serves, and this command follows its progress and prints its report.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from services.cli.jobs import ApiKey
from services.cli.progress import ProgressDisplay
from services.judge.settings import JudgeSettings

eval_app = typer.Typer(help="Measure judges against human judgments.", rich_markup_mode=None)


@eval_app.command("judge")
def judge(
    data: Annotated[
        str | None,
        typer.Option(
            help="MT-Bench votes: mtbench_human/dev or mtbench_human/test (the dataset, see "
            "`plaudit data fetch mtbench_human`) or a JSONL file"
        ),
    ] = None,
    server: Annotated[
        str | None, typer.Option(help="run on this server as a job (its judge is measured)")
    ] = None,
    api_key: ApiKey = None,
    server_data: Annotated[
        str | None, typer.Option(help="with --server: a votes file on the server (admin key)")
    ] = None,
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
    from services.judge import evaluation as ev

    fields = {
        "method": method,
        "k": k,
        "mode": mode,
        "swap": swap,
        "template": template,
        "limit": limit,
        "seed": seed,
        "non_tie_only": non_tie_only,
        "max_chars": max_chars,
        "max_new_tokens": max_new_tokens,
        "verdict_fallback": verdict_fallback,
        "batch": batch,
    }
    votes = _votes_file(data) if data is not None else None
    if server is not None:
        if backend or model or base_url:
            _bad("--backend, --model and --base-url choose a local judge; a server uses its own")
        report = _on_server(server, api_key, votes, server_data, fields)
    elif votes is None or server_data is not None:
        _bad("give --data (a local votes file); --server-data needs --server")
    else:
        judge_settings = {"backend": backend, "model": model, "base_url": base_url}
        report = _in_process(votes, fields, judge_settings)
    typer.echo(ev.table(report))
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=2))
        typer.echo(f"report written to {out}")


def _votes_file(data: str) -> Path:
    """``mtbench_human/<split>`` in the fetched dataset, or a file path."""
    name, _, split = data.partition("/")
    if name == "mtbench_human" and split in ("dev", "test"):
        from services.datasets.store import locate, missing_hint
        from services.settings import get_settings

        path = locate(get_settings(), name) / f"{split}.jsonl"
        if not path.is_file():
            _bad(f"the mtbench_human dataset is not in {path.parent}: {missing_hint(name)}")
        return path
    path = Path(data).expanduser()
    if not path.is_file():
        _bad(f"--data {data}: no such file (or give mtbench_human/dev or mtbench_human/test)")
    return path


def _bad(message: str) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)


def _on_server(
    server: str,
    api_key: str | None,
    data: Path | None,
    server_data: str | None,
    fields: dict[str, Any],
) -> dict[str, Any]:
    from services.cli.jobs import run_on_server

    if (data is None) == (server_data is None):
        _bad("with --server, give --data (sent inline) or --server-data (a file on the server)")
    body = dict(fields)
    if data is not None:
        body.update(votes=_sampled_rows(data, fields), source=data.name)
    else:
        body["data"] = server_data
    return run_on_server(server, api_key, "/v1/judge/evaluations", body)


def _sampled_rows(data: Path, fields: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows the server's sampling will keep (the same seed draws the same sample from
    them), so only those are sent."""
    from services.judge import evaluation as ev

    rows = ev.load_rows(data)
    votes = ev.stratified_sample(
        ev.parse_votes(rows), fields["limit"], fields["seed"], non_tie_only=fields["non_tie_only"]
    )
    kept = {v.id for v in votes}
    return [row for row in rows if row["id"] in kept]


def _in_process(
    data: Path, fields: dict[str, Any], judge_settings: dict[str, str | None]
) -> dict[str, Any]:
    from plaudit_wire.judge import EvaluationRequest
    from services.settings import get_settings

    overrides = {f"judge_{name}": v for name, v in judge_settings.items() if v is not None}
    settings = get_settings().with_overrides(**overrides)
    try:
        request = EvaluationRequest(data=str(data), **fields)
    except ValueError as exc:
        _bad(str(exc))
    return asyncio.run(_evaluate(settings, request))


async def _evaluate(settings: Any, request: Any) -> dict[str, Any]:
    from services.core.cache import MemoryCache
    from services.core.models.cached_judge import CachedJudge
    from services.core.models.layer import model_backend
    from services.judge.jobs import run_evaluation, sampled_votes
    from services.judge.service import JudgeService

    votes = sampled_votes(request, Path.cwd())
    backend = model_backend(settings, "judge", JudgeSettings.of(settings))
    await backend.start()
    service = JudgeService(JudgeSettings.of(settings), CachedJudge(backend, MemoryCache()), None)
    display = ProgressDisplay()
    done = 0

    async def judged(n: int) -> None:
        nonlocal done
        done += n
        display.update(done, len(votes), "judging votes")

    try:
        return await run_evaluation(
            service,
            request,
            votes,
            backend=backend,
            backend_kind=JudgeSettings.of(settings).backend,
            progress=judged,
        )
    finally:
        display.close()
        await backend.aclose()
