"""The MT-Bench evaluation as a job: it measures the judge this process serves.

``POST /v1/judge/evaluations`` starts ``judge.evaluation``; ``plaudit eval judge`` runs the
same :func:`run_evaluation` in its own process when no ``--server`` is given.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from judges.backends.base import JudgeBackend
from plaudit_wire.judge import EvaluationRequest, JudgeOptions
from services.core.errors import Forbidden, InvalidInput
from services.core.jobs.context import JobContext, JobFunction, JobRegistry
from services.core.settings import CoreSettings
from services.core.web.auth import Caller
from services.core.web.server_files import regular_file
from services.judge import evaluation as ev
from services.judge.service import JudgeService
from services.judge.settings import JudgeSettings

EVALUATION = "judge.evaluation"
log = logging.getLogger(__name__)

Progress = Callable[[int], Awaitable[None]]


def sampled_votes(request: EvaluationRequest, data_dir: Path) -> list[ev.Vote]:
    """The request's votes (inline, or read from ``data``), sampled as it asks."""
    if request.votes is not None:
        votes = ev.parse_votes(request.votes)
    else:
        votes = ev.load_votes(data_path(request, data_dir))
    return ev.stratified_sample(
        votes, request.limit, request.seed, non_tie_only=request.non_tie_only
    )


def data_path(request: EvaluationRequest, data_dir: Path) -> Path:
    """``data`` as a path on this machine (relative paths are under the data directory)."""
    path = Path(request.data or "")
    return path if path.is_absolute() else data_dir / path


async def check_request(request: EvaluationRequest, caller: Caller, data_dir: Path) -> None:
    """Refuse at once what the job would fail on: a server file without the admin scope, a
    missing file, malformed inline votes."""
    if request.data is not None:
        if not caller.admin:
            raise Forbidden(
                "reading a file on the server needs the admin scope; send the votes inline",
                param="data",
            )
        if not regular_file(data_path(request, data_dir)):
            raise _no_votes_file(request.data)
    try:
        await asyncio.to_thread(sampled_votes, request, data_dir)
    except (ValueError, OSError, RecursionError) as exc:
        if request.data is not None:  # the same answer as a missing file (issue 23)
            log.warning("evaluation data %r is unreadable: %s", request.data, type(exc).__name__)
            raise _no_votes_file(request.data) from None
        raise InvalidInput(str(exc), param="votes") from None


def _no_votes_file(data: str) -> InvalidInput:
    return InvalidInput(
        f"{data[:300]!r} is not a JSONL file of MT-Bench votes that the server can read",
        param="data",
    )


async def run_evaluation(
    service: JudgeService,
    request: EvaluationRequest,
    votes: list[ev.Vote],
    *,
    backend: JudgeBackend,
    backend_kind: str,
    progress: Progress | None = None,
    resumed: Sequence[ev.VoteOutcome] = (),
    judged: ev.Judged | None = None,
    earlier_s: float = 0.0,
) -> dict[str, Any]:
    """Judge ``votes`` and build the JSON report (the same one ``plaudit eval judge`` writes).

    ``resumed`` are the outcomes of the first votes, judged by an earlier attempt of the job
    (its checkpoint), which this one does not judge again; ``judged`` gets every outcome so
    far after each batch; ``earlier_s`` is the earlier attempts' judging time."""
    started = time.monotonic()
    todo = votes[len(resumed) :]

    async def all_judged(new: Sequence[ev.VoteOutcome]) -> None:
        if judged is not None:
            await judged([*resumed, *new])

    if request.method == "scale":
        outcomes = await ev.grade_votes(
            service,
            todo,
            k=request.k,
            max_chars=request.max_chars,
            batch=request.batch,
            progress=progress,
            judged=all_judged,
        )
    else:
        outcomes = await ev.judge_votes(
            service,
            todo,
            _options(request),
            max_chars=request.max_chars,
            batch=request.batch,
            progress=progress,
            judged=all_judged,
        )
    config = _config(request, backend_kind, backend.info.model_id, len(votes))
    config["seconds"] = round(earlier_s + time.monotonic() - started, 1)
    config["resumed_from"] = len(resumed)  # votes an earlier attempt judged (issue 23)
    return ev.report([*resumed, *outcomes], config)


def _options(request: EvaluationRequest) -> JudgeOptions:
    return JudgeOptions(
        mode=request.mode,
        swap=request.swap,
        template=request.template,
        max_new_tokens=request.max_new_tokens,
        verdict_fallback=request.verdict_fallback,
    )


def _config(
    request: EvaluationRequest, backend_kind: str, model: str, votes: int
) -> dict[str, Any]:
    data = request.data or f"inline:{request.source or 'votes'}"
    return {
        "data": data,
        "backend": backend_kind,
        "model": model,
        "method": request.method,
        "k": request.k if request.method == "scale" else None,
        "mode": request.mode,
        "swap": request.swap,
        "template": request.template,
        "limit": request.limit,
        "seed": request.seed,
        "non_tie_only": request.non_tie_only,
        "max_chars": request.max_chars,
        "max_new_tokens": request.max_new_tokens,
        "verdict_fallback": request.verdict_fallback if request.mode == "generate" else None,
        "votes": votes,
    }


def evaluation_job(
    service: JudgeService,
    backend: JudgeBackend,
    settings: CoreSettings,
    loaded: Callable[[], Awaitable[None]],
) -> JobFunction:
    """The ``judge.evaluation`` job, bound to this process's judge."""

    async def run(ctx: JobContext, params: dict[str, Any]) -> dict[str, Any]:
        request = EvaluationRequest.model_validate(params)
        votes = await asyncio.to_thread(sampled_votes, request, settings.data_dir)
        resumed, earlier_s = _resumed(ctx.checkpoint, votes)
        await ctx.progress(len(resumed), len(votes), "waiting for the judge to load")
        await loaded()
        done = len(resumed)
        started = time.monotonic()

        async def progress(n: int) -> None:
            nonlocal done
            done += n
            await ctx.progress(done, len(votes), "judging votes")

        async def judged(outcomes: Sequence[ev.VoteOutcome]) -> None:
            seconds = earlier_s + time.monotonic() - started
            await ctx.save_checkpoint(_checkpoint(outcomes, seconds))

        await ctx.progress(done, len(votes), "judging votes")
        report = await run_evaluation(
            service,
            request,
            votes,
            backend=backend,
            backend_kind=JudgeSettings.of(settings).backend,
            progress=progress,
            resumed=resumed,
            judged=judged,
            earlier_s=earlier_s,
        )
        _fail_if_nothing_judged(report)
        return report

    return run


def _checkpoint(outcomes: Sequence[ev.VoteOutcome], seconds: float) -> dict[str, Any]:
    """The votes judged so far (issue 23): a retried job judges only the rest."""
    return {"outcomes": [ev.outcome_json(o) for o in outcomes], "seconds": round(seconds, 1)}


def _resumed(checkpoint: Any, votes: list[ev.Vote]) -> tuple[list[ev.VoteOutcome], float]:
    """The outcomes an earlier attempt saved for the first votes, and its judging time; none
    when the checkpoint does not fit the votes (the data changed in between)."""
    if not isinstance(checkpoint, dict):
        return [], 0.0
    saved = checkpoint.get("outcomes") or []
    try:
        if len(saved) > len(votes):
            raise ValueError("more outcomes than votes")
        resumed = [ev.outcome_of(value, vote) for value, vote in zip(saved, votes, strict=False)]
    except (TypeError, ValueError) as exc:
        log.warning("the evaluation's checkpoint does not fit its votes (%s); starting afresh", exc)
        return [], 0.0
    return resumed, float(checkpoint.get("seconds") or 0.0)


def _fail_if_nothing_judged(report: dict[str, Any]) -> None:
    overall = report["overall"]
    if overall["votes"] and overall["failed"] == overall["votes"]:
        raise RuntimeError(f"the judge answered none of the {overall['votes']} votes")


def register(
    registry: JobRegistry,
    service: JudgeService,
    backend: JudgeBackend,
    settings: CoreSettings,
    loaded: Callable[[], Awaitable[None]],
) -> None:
    """Register ``judge.evaluation`` for this process's judge."""
    registry.register(EVALUATION, evaluation_job(service, backend, settings, loaded))
