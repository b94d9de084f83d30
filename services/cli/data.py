"""``plaudit data list|fetch|verify``: the default datasets by name (issue 21)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from services.cli.progress import ProgressDisplay
from services.datasets import registry

if TYPE_CHECKING:
    from services.datasets.store import Verdict

data_app = typer.Typer(
    help="Public datasets by name: list, fetch (download or --from), verify.", rich_markup_mode=None
)

NameArg = Annotated[str, typer.Argument(help=f"one of: {', '.join(registry.DATASETS)}")]


def _fail(message: str) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(1)


def _dataset(name: str) -> registry.Dataset:
    try:
        return registry.get(name)
    except KeyError as exc:
        _fail(str(exc.args[0]))


@data_app.command("list")
def list_() -> None:
    """Each dataset: whether it is here, its source and licence."""
    from services.datasets.store import locate
    from services.settings import get_settings

    settings = get_settings()
    for dataset in registry.DATASETS.values():
        folder = locate(settings, dataset.name)
        here = "here" if all((folder / f).is_file() for f in dataset.files) else "not fetched"
        typer.echo(f"{dataset.name} ({here}: {folder})")
        typer.echo(f"  {dataset.summary}")
        typer.echo(f"  source: {dataset.source.describe()}")
        typer.echo(f"  licence: {dataset.licence}")
        typer.echo(f"  used by: {dataset.used_by}")


@data_app.command("fetch")
def fetch(
    name: NameArg,
    from_: Annotated[
        Path | None,
        typer.Option(
            "--from",
            exists=True,
            file_okay=False,
            help="a local folder: a prepared copy, or the public source",
        ),
    ] = None,
    sample: Annotated[bool, typer.Option(help="the small sample shipped with Plaudit")] = False,
) -> None:
    """Download (or take ``--from``) the dataset, build it into the data directory, verify it."""
    from services.datasets.builders import BuildError
    from services.datasets.store import fetch as fetch_dataset
    from services.datasets.store import verify
    from services.settings import get_settings

    dataset, settings = _dataset(name), get_settings()
    if sample and from_ is not None:
        _fail("give --sample or --from, not both")
    display = ProgressDisplay(every_s=5.0)
    try:
        folder = fetch_dataset(
            dataset, settings.datasets_root, display.update, source=from_, sample=sample
        )
    except BuildError as exc:
        _fail(str(exc))
    display.close()
    _report(verify(dataset, folder))


@data_app.command("verify")
def verify_(name: NameArg) -> None:
    """Check the dataset's files against their recorded checksums."""
    from services.datasets.store import locate, missing_hint, verify
    from services.settings import get_settings

    dataset = _dataset(name)
    folder = locate(get_settings(), name)
    if not folder.is_dir():
        _fail(f"{name} is not in {folder}: {missing_hint(name)}")
    _report(verify(dataset, folder))


def _report(verdict: Verdict) -> None:
    for problem in verdict.problems:
        typer.echo(f"  {problem}", err=True)
    if verdict.problems:
        _fail(f"{verdict.folder}: {len(verdict.problems)} problem(s)")
    kind = "the reference build" if verdict.reference else verdict.origin
    typer.echo(f"ok: {verdict.folder} ({kind})")
