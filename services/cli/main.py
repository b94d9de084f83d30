"""The ``plaudit`` command: serve, migrate the database, run job workers.

Heavy imports happen inside commands, so ``plaudit --version`` works on a client-only install.
"""

from __future__ import annotations

import asyncio
import os
from typing import TYPE_CHECKING, Annotated

import typer

import services
from services.cli.data import data_app
from services.cli.eval import eval_app
from services.cli.jobs import jobs_app
from services.cli.karma import karma_app
from services.cli.rubrics import rubrics_app
from services.cli.simulator import simulator_app
from services.cli.train import train

if TYPE_CHECKING:
    from services.core.settings import CoreSettings

#: SERVICE argument of ``plaudit serve`` -> app factory for ``uvicorn --factory``.
APPS = {
    "all": "services.app:create_app",
    "ordinal": "services.ordinal.app:create_app",
    "diversity": "services.diversity.app:create_app",
    "judge": "services.judge.app:create_app",
    "simulator": "services.simulator.app:create_app",
}

app = typer.Typer(
    help="Plaudit: reward and judge services for RL post-training.", rich_markup_mode=None
)
db_app = typer.Typer(help="Database migrations (Alembic).", rich_markup_mode=None)
app.add_typer(db_app, name="db")
app.add_typer(data_app, name="data")
app.add_typer(eval_app, name="eval")
app.add_typer(jobs_app, name="jobs")
app.add_typer(karma_app, name="karma")
app.add_typer(rubrics_app, name="rubrics")
app.add_typer(simulator_app, name="simulator")
app.command("train")(train)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"plaudit {services.__version__}")
        raise typer.Exit()


@app.callback()
def root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print version.")
    ] = False,
) -> None:
    """Plaudit: reward and judge services for RL post-training."""


def _settings() -> CoreSettings:
    try:
        from services.settings import get_settings
    except ImportError as exc:  # the client-only install
        typer.echo(
            f"error: the server parts are not installed ({exc}); pip install 'plaudit[serve]'"
        )
        raise typer.Exit(2) from exc
    return get_settings()


@app.command()
def serve(
    service: Annotated[str, typer.Argument(help=f"one of: {', '.join(APPS)}")] = "all",
    host: Annotated[str | None, typer.Option(help="bind address (default PLAUDIT_HOST)")] = None,
    port: Annotated[int | None, typer.Option(help="port (default PLAUDIT_PORT)")] = None,
    workers: Annotated[int, typer.Option(min=1, help="uvicorn worker processes")] = 1,
) -> None:
    """Serve one service, or every service in one process (``all``, the default)."""
    if service not in APPS:
        typer.echo(
            f"error: unknown service {service!r}; choose one of: {', '.join(APPS)}", err=True
        )
        raise typer.Exit(2)
    settings = _settings()
    bind_host = host or settings.host
    bind_port = port or settings.port
    from services.core.context import configure_logging
    from services.core.errors import InvalidInput
    from services.core.heap import freeze_in_this_process
    from services.core.web.auth import check_bind_allowed

    try:
        check_bind_allowed(settings, bind_host)
    except InvalidInput as exc:
        typer.echo(f"error: {exc.message}", err=True)
        raise typer.Exit(2) from exc
    configure_logging(settings.log_level)
    freeze_in_this_process()  # a served process keeps its start-up objects (services/core/heap.py)
    # Each model load is one log line (judges/model_worker.py), not a tqdm bar drawn into the
    # server's log; transformers reads this when first imported, here and in --workers.
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    factory = APPS[service] if workers == 1 else _share_between_workers(settings, service)
    import uvicorn

    typer.echo(
        f"plaudit {services.__version__}: serving {service} on http://{bind_host}:{bind_port}"
    )
    uvicorn.run(
        factory,
        factory=True,
        host=bind_host,
        port=bind_port,
        workers=workers,
        log_level=settings.log_level.lower(),
        log_config=None,
        access_log=False,  # plaudit.access logs one line per request (uvicorn's is a second)
        http="services.core.web.http_protocol:EnvelopeHTTPProtocol",  # its 400s as the envelope
    )


def _share_between_workers(settings: CoreSettings, service: str) -> str:
    """Ready ``--workers N``: the worker processes share the judge cache and limits through
    Redis, so they must render the same judge prompts (one fence secret, drawn here when
    unset); the database is migrated here, once; each worker configures its own logging.
    Returns the factory the workers run."""
    import os
    import secrets

    from services.judge.settings import JudgeSettings

    if not settings.redis_url:
        typer.echo(
            "error: --workers above 1 needs PLAUDIT_REDIS_URL: the workers share the judge "
            "cache, limits and job queue through Redis (the embedded stand-ins are per process)",
            err=True,
        )
        raise typer.Exit(2)
    if JudgeSettings.of(settings).fence_secret is None:
        os.environ["PLAUDIT_JUDGE_FENCE_SECRET"] = secrets.token_hex(32)
    if settings.auto_migrate:  # once, here: workers migrating one database at once can fail
        from services.core.db import engine as db

        db.upgrade(settings.resolved_database_url)
        os.environ["PLAUDIT_AUTO_MIGRATE"] = "false"
    from services.core.web import worker_app

    os.environ[worker_app.FACTORY_VAR] = APPS[service]
    return "services.core.web.worker_app:create_app"


@db_app.command("upgrade")
def db_upgrade(
    revision: Annotated[str, typer.Argument(help="target revision")] = "head",
) -> None:
    """Migrate the configured database (PLAUDIT_DATABASE_URL, else the embedded SQLite file)."""
    from services.core.db import engine as db

    url = _settings().resolved_database_url
    db.upgrade(url, revision)
    typer.echo(f"database at {revision}")


@db_app.command("wait")
def db_wait(
    timeout: Annotated[float, typer.Option(min=0, help="seconds to wait at most")] = 300.0,
) -> None:
    """Wait until the configured database is migrated to head (for init containers)."""
    from services.core.db import engine as db

    problem = asyncio.run(db.wait_for_head(_settings().resolved_database_url, timeout))
    if problem is not None:
        typer.echo(f"error: the database is not migrated after {timeout:g} s: {problem}", err=True)
        raise typer.Exit(1)
    typer.echo("database at head")


@db_app.command("downgrade")
def db_downgrade(
    revision: Annotated[str, typer.Argument(help="target revision, e.g. base")],
) -> None:
    """Step the configured database back to ``revision``."""
    from services.core.db import engine as db

    db.downgrade(_settings().resolved_database_url, revision)
    typer.echo(f"database at {revision}")


@app.command()
def worker(
    burst: Annotated[bool, typer.Option(help="exit when the queue is empty")] = False,
) -> None:
    """Run the jobs queued on Redis (PLAUDIT_REDIS_URL must be set), with the same job
    functions and collaborators as a server built from the same settings."""
    settings = _settings()
    if not settings.redis_url:
        typer.echo(
            "error: plaudit worker needs PLAUDIT_REDIS_URL (the embedded default runs "
            "jobs in the serving process)",
            err=True,
        )
        raise typer.Exit(2)
    from services.core.context import configure_logging
    from services.core.settings_check import warn_unknown
    from services.jobs.worker import run_worker

    configure_logging(settings.log_level)
    warn_unknown(type(settings))
    asyncio.run(run_worker(settings, burst=burst))


def main() -> None:
    app()


if __name__ == "__main__":
    main()
