"""``plaudit karma train`` and ``plaudit karma eval`` (torch is imported inside).

``plaudit karma train`` alone fine-tunes the bundled MiniLM on the shared reddit_karma data
(``context_only``), evaluates it on the test split, saves it under
``PLAUDIT_KARMA_MODELS_DIR`` and stores it in this set-up's artifact store (serving at once when
it is the name's first version; ``--no-store`` skips that). With ``--server URL`` the same
training runs on that server as a ``karma.train`` job (admin key), this command follows its
progress, and the model is stored there the same way. ``plaudit karma eval --model DIR
--pairs FILE`` evaluates a trained model on any JSONL of pairs or scored replies
(or ``reddit_karma``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from services.cli.jobs import ApiKey
from services.cli.progress import progress_display
from services.karma.settings import KarmaSettings

karma_app = typer.Typer(
    help="KARMA: a reward model of how replies were valued (karma).", rich_markup_mode=None
)


def _settings() -> tuple[Path, Path, Path]:
    """The reddit_karma folder, the models folder and the embedding cache, from settings."""
    try:
        from services.settings import get_settings
    except ImportError as exc:
        typer.echo(
            f"error: the training parts are not installed ({exc}); pip install 'plaudit[train]'"
        )
        raise typer.Exit(2) from exc
    from services.datasets.store import dataset_folder

    settings = get_settings()
    data_dir = dataset_folder(settings, "reddit_karma", KarmaSettings.of(settings).data_dir)
    return (
        data_dir,
        KarmaSettings.of(settings).models_dir,
        KarmaSettings.of(settings).embeddings_dir,
    )


@karma_app.command("train")
def train(
    data: Annotated[str, typer.Option(help="'reddit_karma' (shared data) or a JSONL")] = (
        "reddit_karma"
    ),
    variant: Annotated[str, typer.Option(help="context_only or with_metadata")] = "context_only",
    method: Annotated[
        str,
        typer.Option(
            help="frozen (default): a head over frozen MiniLM embeddings, every pair in minutes on "
            "a CPU; finetune: fine-tune the cross-encoder with TRL (for a GPU: --device cuda)"
        ),
    ] = "frozen",
    base_model: Annotated[
        str, typer.Option(help="finetune: 'bundled' MiniLM or a model folder")
    ] = "bundled",
    out: Annotated[Path | None, typer.Option(help="model folder (default MODELS_DIR/RUN)")] = None,
    max_train_pairs: Annotated[
        int | None,
        typer.Option(
            min=0, help="pairs trained on (0: all; default: all for frozen, 4000 for finetune)"
        ),
    ] = None,
    encoder: Annotated[
        str | None,
        typer.Option(help="frozen: 'bundled' MiniLM, a folder, or 'none' (text features only)"),
    ] = None,
    encoder_layers: Annotated[
        int | None,
        typer.Option(min=0, help="frozen: the encoder's first N layers (0: all; bundled: 3)"),
    ] = None,
    head_epochs: Annotated[int | None, typer.Option(min=1, help="frozen: passes (2)")] = None,
    head_hidden: Annotated[int | None, typer.Option(min=1, help="frozen: MLP width (64)")] = None,
    max_length: Annotated[int | None, typer.Option(min=16, help="tokens (default 256)")] = None,
    batch_size: Annotated[int | None, typer.Option(min=1, help="pairs a step (16)")] = None,
    lr: Annotated[float | None, typer.Option(min=0, help="learning rate (5e-5)")] = None,
    epochs: Annotated[float | None, typer.Option(min=0, help="passes (1)")] = None,
    rank_fraction: Annotated[
        float | None, typer.Option(help="share of within-thread ranking pairs (0)")
    ] = None,
    eval_split: Annotated[str, typer.Option(help="dev (tuning) or test (reporting)")] = "test",
    eval_max_pairs: Annotated[int, typer.Option(min=0, help="0: every pair")] = 0,
    spearman_threads: Annotated[int, typer.Option(min=1, help="threads ranked")] = 300,
    threads: Annotated[int | None, typer.Option(min=1, help="torch CPU threads")] = None,
    device: Annotated[str | None, typer.Option(help="cpu or cuda (default: auto)")] = None,
    seed: Annotated[int, typer.Option(help="sampling and initialization seed")] = 0,
    server: Annotated[
        str | None, typer.Option(help="train on this server as a job and follow it (admin key)")
    ] = None,
    api_key: ApiKey = None,
    name: Annotated[str, typer.Option(help="the stored model's name")] = "karma",
    promote: Annotated[
        bool, typer.Option(help="serve the new version even if another serves")
    ] = False,
    store: Annotated[
        bool,
        typer.Option(
            help="in-process: also store the model in this set-up's artifact store (the one "
            "'plaudit serve' reads), serving at once when it is the name's first version"
        ),
    ] = True,
) -> None:
    """Train a KARMA reward model (frozen-encoder head, or TRL fine-tuning), evaluate, save."""
    from services.core.errors import InvalidInput

    options: dict[str, Any] = dict(
        data=data,
        variant=variant,
        method=method,
        base_model=base_model,
        output_dir=out,
        max_train_pairs=max_train_pairs,
        encoder=encoder,
        encoder_layers=encoder_layers,
        head_epochs=head_epochs,
        head_hidden=head_hidden,
        max_length=max_length,
        batch_size=batch_size,
        learning_rate=lr,
        epochs=epochs,
        rank_fraction=rank_fraction,
        eval_split=eval_split,
        eval_max_pairs=eval_max_pairs,
        spearman_threads=spearman_threads,
        threads=threads,
        device=device,
        seed=seed,
    )
    if server is not None:
        if out is not None:
            raise typer.BadParameter(
                "--out: the server stores the model itself", param_hint="--out"
            )
        _train_on_server(server, api_key, {**options, "name": name, "promote": promote})
        return
    config = _config(**options)
    data_dir, models_dir, embeddings_dir = _settings()
    try:
        from services.karma.training import train_karma
    except ImportError as exc:
        typer.echo(f"error: the trainer is not installed ({exc}); pip install 'plaudit[train]'")
        raise typer.Exit(2) from exc
    try:
        with progress_display() as progress:
            result = train_karma(
                config,
                data_dir=data_dir,
                models_dir=models_dir,
                cache_dir=embeddings_dir,
                progress=progress,
            )
    except InvalidInput as exc:
        typer.echo(f"error: {exc.message}", err=True)
        raise typer.Exit(2) from exc
    training = result.metrics["training"]
    typer.echo(
        f"trained in {training['train_seconds']:.0f} s ({training['steps']} steps); "
        f"saved to {result.path}"
    )
    if store:
        import asyncio

        stored_name, version, serving = asyncio.run(
            _store_locally(result.path, result.metrics, name=name, promote=promote)
        )
        state = "serving" if serving else "not serving: promote it to serve"
        typer.echo(f"stored as {stored_name}@{version} ({state})")
    typer.echo(summary(result.metrics["evaluation"]))


async def _store_locally(
    folder: Path, metrics: dict[str, Any], *, name: str, promote: bool
) -> tuple[str, int, bool]:
    """Put an in-process run's model into this set-up's artifact store, as the
    ``karma.train`` job does on a server. Returns the name, the version and whether it serves."""
    from services.core.store.local import put_locally
    from services.karma.service import KIND, version_metadata

    version = await put_locally(
        name,
        KIND,
        metrics,
        metadata=version_metadata(metrics, None),
        files=folder,
        note="plaudit karma train (in-process)",
        make_current=promote,
    )
    return version.name, version.version, version.current


@karma_app.command("eval")
def evaluate_command(
    model: Annotated[Path, typer.Option(help="a trained KARMA model folder")],
    pairs: Annotated[str, typer.Option(help="JSONL of pairs or scored replies, or reddit_karma")],
    split: Annotated[
        str | None,
        typer.Option(help="train/dev/test/all (default: test for reddit_karma, else all)"),
    ] = None,
    max_pairs: Annotated[int, typer.Option(min=0, help="0: every pair")] = 0,
    spearman_threads: Annotated[int, typer.Option(min=1, help="threads ranked")] = 300,
    out: Annotated[Path | None, typer.Option(help="also write the metrics as JSON here")] = None,
    seed: Annotated[int, typer.Option(help="sampling seed")] = 0,
) -> None:
    """Pair accuracy, per score-ratio bin, within-thread Spearman, beside the baselines."""
    from services.core.errors import InvalidInput
    from services.karma.data import load_data
    from services.karma.evaluation import EvalOptions, evaluate
    from services.karma.model import load_model

    data_dir, _, _ = _settings()
    try:
        data = load_data(pairs, data_dir)
        chosen = split or ("test" if pairs == "reddit_karma" else "all")
        if chosen != "all":
            data = data.split(chosen)
        scorer = load_model(model)
    except InvalidInput as exc:
        typer.echo(f"error: {exc.message}", err=True)
        raise typer.Exit(2) from exc
    options = EvalOptions(max_pairs or None, spearman_threads, seed=seed)
    with progress_display() as progress:
        result = evaluate(scorer, data, options, progress)
    typer.echo(summary(result))
    if out is not None:
        out.write_text(json.dumps(result, indent=2) + "\n")


def _train_on_server(server: str, api_key: str | None, options: dict[str, Any]) -> None:
    """Start ``karma.train`` on ``server``, follow it, print where the model went and its
    evaluation (the full result as JSON on stdout)."""
    from services.cli.jobs import run_on_server

    body = {k: v for k, v in options.items() if v is not None and k != "output_dir"}
    if body.get("eval_max_pairs") == 0:  # 0 means all; max_train_pairs takes 0 itself
        body["eval_max_pairs"] = None
    result = run_on_server(server, api_key, "/v1/karma/train", body)
    model = result["model"]
    serving = "serving" if model["serving"] else "not serving: promote it to serve"
    typer.echo(f"stored as {model['name']}@{model['version']} ({serving})", err=True)
    typer.echo(summary(result["evaluation"]), err=True)
    typer.echo(json.dumps(result, indent=2))


def summary(evaluation: dict[str, Any]) -> str:
    """A few readable lines: accuracy and Spearman beside the baselines, accuracy per bin."""
    length = evaluation["baselines"]["length"]
    rho, length_rho = evaluation["spearman"], length["spearman"]
    lines = [
        f"{evaluation['split']}: {evaluation['pairs']} pairs",
        f"  pair accuracy {_pct(evaluation['pair_accuracy'])}  (longer reply wins "
        f"{_pct(length['pair_accuracy'])}, random 50.0%)",
        f"  within-thread Spearman {_num(rho['mean'])}  (length {_num(length_rho['mean'])}, "
        f"random 0) over {rho['threads']} threads, {rho['replies']} replies",
    ]
    matched, length_matched = evaluation.get("length_matched"), length.get("length_matched")
    if matched is not None and length_matched is not None:
        lines.append(
            f"  length-matched pairs (within 20%): {_pct(matched['accuracy'])} (length "
            f"{_pct(length_matched['accuracy'])}, {matched['pairs']} pairs)"
        )
    for model_bin, length_bin in zip(evaluation["by_ratio"], length["by_ratio"], strict=True):
        lines.append(
            f"  ratio {model_bin['bin']:>9}: {_pct(model_bin['accuracy'])} "
            f"(length {_pct(length_bin['accuracy'])}, {model_bin['pairs']} pairs)"
        )
    return "\n".join(lines)


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def _num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _config(**fields: Any) -> Any:
    """The run's config; options left out keep KarmaTrainConfig's defaults."""
    from pydantic import ValidationError

    from plaudit_wire.karma import KarmaTrainConfig

    fields = {k: v for k, v in fields.items() if v is not None}
    if fields.get("eval_max_pairs") == 0:  # 0 means all (max_train_pairs takes 0 itself)
        fields["eval_max_pairs"] = None
    try:
        return KarmaTrainConfig(**fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise typer.BadParameter(f"{where}: {first['msg']}") from None
