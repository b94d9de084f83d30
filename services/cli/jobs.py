"""``plaudit jobs list|show|wait|cancel``: a server's jobs over HTTP."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import typer

from services.cli.jobs_client import connect, describe, follow
from services.cli.progress import ProgressDisplay
from trainer_client import PlauditClient
from trainer_client.errors import PlauditError

jobs_app = typer.Typer(help="Follow and control a server's jobs.", rich_markup_mode=None)

Server = Annotated[
    str, typer.Option(envvar="PLAUDIT_URL", help="the server's URL (env PLAUDIT_URL)")
]
ApiKey = Annotated[
    str | None, typer.Option(envvar="PLAUDIT_API_KEY", help="API key (env PLAUDIT_API_KEY)")
]
JobId = Annotated[str, typer.Argument(help="the job's id")]
DEFAULT_SERVER = "http://127.0.0.1:8000"


@contextmanager
def client_for(server: str, api_key: str | None) -> Iterator[PlauditClient]:
    """A client whose errors end the command with the server's message (exit 2)."""
    try:
        with connect(server, api_key) as client:
            yield client
    except PlauditError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc


def run_on_server(
    server: str, api_key: str | None, path: str, body: dict[str, Any]
) -> dict[str, Any]:
    """Start the job that ``POST path`` starts on ``server``, show its progress until it ends,
    and return its result; a job that did not succeed ends the command (exit 1). The one job
    follower of the karma, simulator, rubrics and eval commands (issue 20)."""
    with client_for(server, api_key) as client:
        job = client.request("POST", path, json=body)
        typer.echo(f"job {job['id']} started on {server}", err=True)
        job = follow(client, job["id"], ProgressDisplay())
    if job["state"] != "succeeded":
        finish(job)
    result: dict[str, Any] = job["result"]
    return result


@jobs_app.command("list")
def list_jobs(
    server: Server = DEFAULT_SERVER,
    api_key: ApiKey = None,
    kind: Annotated[str | None, typer.Option(help="only this kind")] = None,
    state: Annotated[str | None, typer.Option(help="queued, running, succeeded, ...")] = None,
    limit: Annotated[int, typer.Option(min=1, max=500)] = 20,
    offset: Annotated[int, typer.Option(min=0)] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="print the page as JSON")] = False,
) -> None:
    """Jobs, newest first (a reward key's own; every job for an admin key)."""
    params: dict[str, Any] = {"limit": limit, "offset": offset}
    params.update({k: v for k, v in (("kind", kind), ("state", state)) if v is not None})
    with client_for(server, api_key) as client:
        page = client.request("GET", "/v1/jobs", params=params)
    if as_json:
        typer.echo(json.dumps(page, indent=2))
        return
    for job in page["items"]:
        typer.echo(describe(job))
    shown = len(page["items"])
    typer.echo(f"{shown} of {page['total']} jobs (offset {page['offset']})", err=True)


@jobs_app.command("show")
def show(job_id: JobId, server: Server = DEFAULT_SERVER, api_key: ApiKey = None) -> None:
    """One job as JSON, with its params and result."""
    with client_for(server, api_key) as client:
        job = client.request("GET", f"/v1/jobs/{job_id}")
    typer.echo(json.dumps(job, indent=2))


@jobs_app.command("wait")
def wait(
    job_id: JobId,
    server: Server = DEFAULT_SERVER,
    api_key: ApiKey = None,
    interval: Annotated[float, typer.Option(min=0.1, help="seconds between polls")] = 1.0,
    every: Annotated[float, typer.Option(min=0, help="seconds between lines off a TTY")] = 30.0,
) -> None:
    """Follow a job until it finishes: a progress bar on a terminal, periodic lines
    elsewhere; the result goes to stdout as JSON. Exit 1 when it failed or was cancelled."""
    with client_for(server, api_key) as client:
        job = follow(client, job_id, ProgressDisplay(every_s=every), interval=interval)
    finish(job)


def finish(job: dict[str, Any]) -> None:
    """Print a finished job's result (stdout) or its error (stderr, exit 1)."""
    typer.echo(describe(job), err=True)
    if job["state"] != "succeeded":
        raise typer.Exit(1)
    typer.echo(json.dumps(job["result"], indent=2))


@jobs_app.command("cancel")
def cancel(job_id: JobId, server: Server = DEFAULT_SERVER, api_key: ApiKey = None) -> None:
    """Cancel a queued job, or ask a running one to stop."""
    with client_for(server, api_key) as client:
        job = client.request("POST", f"/v1/jobs/{job_id}/cancel")
    note = " (stop requested)" if job["state"] == "running" else ""
    typer.echo(describe(job) + note)
