"""``plaudit train``: GRPO on a small policy, rewards from a Plaudit server over HTTP.

The trainer (torch, transformers, trl) is imported inside the command, so ``plaudit --help``
stays light. With a server from ``make serve`` running, ``plaudit train`` alone trains the
bundled SmolLM2-135M-Instruct for 10 steps on built-in prompts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from trainer_client.client import DEFAULT_BASE_URL

if TYPE_CHECKING:
    from trainer.config import TrainConfig

DEFAULT_SPEC_HELP = "diversity + judge_scale (k=5), rewards"


def parse_spec(value: str | None) -> dict[str, Any] | None:
    """A reward spec given as JSON text or ``@path`` to a JSON file; None keeps the default.

    >>> parse_spec('{"channels": {"diversity": {}}}')
    {'channels': {'diversity': {}}}
    """
    if value is None:
        return None
    text = value
    if value.startswith("@"):
        path = Path(value[1:]).expanduser()
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            message = f"cannot read {path}: {exc.strerror}"
            raise typer.BadParameter(message, param_hint="--spec") from None
    try:
        spec = json.loads(text)
    except json.JSONDecodeError as exc:
        raise typer.BadParameter(f"not JSON: {exc.msg}", param_hint="--spec") from None
    if not isinstance(spec, dict):
        raise typer.BadParameter("must be a JSON object", param_hint="--spec")
    return spec


def train(
    server: Annotated[str, typer.Option(help="Plaudit server URL")] = DEFAULT_BASE_URL,
    prompts: Annotated[
        Path | None,
        typer.Option(exists=True, dir_okay=False, help="JSONL {prompt} or one prompt per line"),
    ] = None,
    steps: Annotated[int, typer.Option(min=1, help="optimizer steps")] = 10,
    spec: Annotated[
        str | None, typer.Option(help=f"reward spec, JSON or @file (default {DEFAULT_SPEC_HELP})")
    ] = None,
    model: Annotated[
        str | None, typer.Option(help="policy: HF dir or .gguf (default SmolLM2-135M-Instruct)")
    ] = None,
    out: Annotated[Path | None, typer.Option(help="output dir (default plaudit-train/RUN)")] = None,
    generations: Annotated[int, typer.Option("-g", "--generations", min=2, help="G")] = 4,
    groups_per_step: Annotated[int, typer.Option(min=1, help="prompts per step")] = 1,
    max_completion_length: Annotated[int, typer.Option(min=1, help="tokens")] = 16,
    lr: Annotated[float, typer.Option(min=0, help="learning rate")] = 1e-5,
    temperature: Annotated[float, typer.Option(min=0, help="sampling temperature")] = 1.0,
    beta: Annotated[float, typer.Option(min=0, help="KL coefficient")] = 0.0,
    run_id: Annotated[str | None, typer.Option(help="run id (default: a fresh one)")] = None,
    api_key: Annotated[
        str | None, typer.Option(envvar="PLAUDIT_API_KEY", help="key with the reward scope")
    ] = None,
    seed: Annotated[int, typer.Option(help="sampling and shuffling seed")] = 0,
    threads: Annotated[
        int | None, typer.Option(min=1, help="torch CPU threads (1 if the server shares the CPU)")
    ] = None,
    save: Annotated[bool, typer.Option(help="save the trained policy under OUT/final")] = True,
) -> None:
    """Train a policy with GRPO (TRL); every reward comes from the Plaudit server."""
    config = _config(
        server=server,
        prompts=prompts,
        steps=steps,
        spec=parse_spec(spec),
        model=model,
        output_dir=out,
        num_generations=generations,
        groups_per_step=groups_per_step,
        max_completion_length=max_completion_length,
        learning_rate=lr,
        temperature=temperature,
        beta=beta,
        run_id=run_id,
        api_key=api_key,
        seed=seed,
        threads=threads,
        save_model=save,
    )
    _run(config)


def _config(server: str, spec: dict[str, Any] | None, **fields: Any) -> TrainConfig:
    from pydantic import ValidationError

    from trainer.config import TrainConfig

    values = {k: v for k, v in fields.items() if v is not None}
    values["server_url"] = server
    if spec is not None:
        values["spec"] = spec
    try:
        return TrainConfig(**values)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise typer.BadParameter(f"{where}: {first['msg']}" if where else first["msg"]) from None


def _run(config: TrainConfig) -> None:
    from trainer.data import PromptFileError, training_prompts
    from trainer.server import ServerCheckError, check_server

    try:
        training_prompts(config.prompts, config.groups_per_step)
    except PromptFileError as exc:
        raise typer.BadParameter(str(exc), param_hint="--prompts") from None
    typer.echo(
        f"plaudit train: run {config.run_id}, {config.steps} steps, server {config.server_url}"
    )
    try:  # before the heavy imports and the model load, so a wrong URL or spec fails at once
        check_server(config)
    except ServerCheckError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc
    try:
        from trainer.runner import train as run_training
    except ImportError as exc:
        typer.echo(f"error: the trainer is not installed ({exc}); pip install 'plaudit[train]'")
        raise typer.Exit(2) from exc
    result = run_training(config, emit=typer.echo, check=False)
    typer.echo(
        f"done: {result.steps} steps, {result.scored} completions scored, {result.failed} failed"
        f"; groups stored under run {result.run_id}"
        + (f"; policy saved to {result.output_dir}" if result.output_dir else "")
    )
