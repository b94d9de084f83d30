"""``plaudit simulator calibrate`` and ``plaudit simulator evaluate`` (torch imported inside).

``plaudit simulator calibrate`` alone calibrates the simulator in-process on the shared USS
dialogues (the CPU default), measures its realism before and after on the test split and
writes the calibration folder (``adapter/``, ``predictor.json``, ``calibration.json``). With
``--server URL`` the same runs on that server as a ``simulator.calibrate`` job (admin key),
this command follows its progress, and the calibration is stored there as a new version that
``/v1/simulator/turn`` takes as ``name@version``. ``plaudit simulator evaluate`` measures the
prompted simulator (and a calibration folder, when given) on any USS-format file.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from services.cli.jobs import ApiKey
from services.cli.progress import progress_display
from services.simulator.settings import SimulatorSettings

simulator_app = typer.Typer(
    help="The user simulator: calibrate it to real users, measure it.", rich_markup_mode=None
)

DataOption = Annotated[
    list[str] | None,
    typer.Option("--data", help="sgd, mwoz, ccpe or a USS-format file (repeat; default all 3)"),
]


def _settings() -> Any:
    try:
        from services.settings import get_settings
    except ImportError as exc:
        typer.echo(
            f"error: the server parts are not installed ({exc}); pip install 'plaudit[serve]'"
        )
        raise typer.Exit(2) from exc
    return get_settings()


@simulator_app.command("calibrate")
def calibrate_command(
    data: DataOption = None,
    max_steps: Annotated[int | None, typer.Option(min=0, help="LoRA steps (40)")] = None,
    batch_size: Annotated[int | None, typer.Option(min=1, help="examples a step (4)")] = None,
    lr: Annotated[float | None, typer.Option(min=0, help="learning rate (3e-4)")] = None,
    max_length: Annotated[
        int | None, typer.Option(min=128, help="tokens (256; the instructions take ~100)")
    ] = None,
    satisfaction_turns: Annotated[int | None, typer.Option(min=10, help="(1500)")] = None,
    eval_per_domain: Annotated[int | None, typer.Option(min=10, help="contexts (40)")] = None,
    eval_split: Annotated[str, typer.Option(help="test (reporting) or dev (tuning)")] = "test",
    eval_dialogues: Annotated[
        int | None, typer.Option(min=0, help="whole dialogues per domain (8; 0: none)")
    ] = None,
    act_turns: Annotated[int | None, typer.Option(min=10, help="act model contexts (6000)")] = None,
    threads: Annotated[int | None, typer.Option(min=1, help="torch CPU threads")] = None,
    device: Annotated[str | None, typer.Option(help="cpu or cuda")] = None,
    seed: Annotated[int, typer.Option(help="sampling seed")] = 0,
    out: Annotated[Path | None, typer.Option(help="in-process: the calibration folder")] = None,
    server: Annotated[
        str | None, typer.Option(help="calibrate on this server as a job and follow it")
    ] = None,
    api_key: ApiKey = None,
    name: Annotated[str, typer.Option(help="the stored calibration's name")] = "uss",
    note: Annotated[str | None, typer.Option(help="kept in the store's history")] = None,
    store: Annotated[
        bool,
        typer.Option(
            help="in-process: also store the calibration in this set-up's artifact store (the "
            "one 'plaudit serve' reads), so /v1/simulator/turn can use it as NAME@VERSION"
        ),
    ] = True,
) -> None:
    """Calibrate the simulator to real dialogues (LoRA + satisfaction predictor), measure it."""
    options: dict[str, Any] = {
        "data": data or None,
        "max_steps": max_steps,
        "batch_size": batch_size,
        "learning_rate": lr,
        "max_length": max_length,
        "satisfaction_turns": satisfaction_turns,
        "eval_per_domain": eval_per_domain,
        "eval_split": eval_split,
        "eval_dialogues": eval_dialogues,
        "act_turns": act_turns,
        "threads": threads,
        "device": device,
        "seed": seed,
    }
    options = {k: v for k, v in options.items() if v is not None}
    if server is not None:
        if out is not None:
            raise typer.BadParameter("the server stores the calibration itself", param_hint="--out")
        _on_server(server, api_key, {**options, "name": name, "note": note})
        return
    from pydantic import ValidationError

    from plaudit_wire.simulator import CalibrationConfig
    from services.core.errors import InvalidInput
    from services.core.models.embedder import load_embedder
    from services.simulator.calibration import calibrate
    from services.simulator.jobs import base_model_dir, uss_dir

    settings = _settings()
    try:
        config = CalibrationConfig(**options)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise typer.BadParameter(f"{'.'.join(map(str, first['loc']))}: {first['msg']}") from None
    folder = out or settings.data_dir / "simulator" / "calibrations" / time.strftime(
        "%Y%m%d-%H%M%S"
    )
    try:
        with progress_display() as progress:
            result = calibrate(
                config,
                base_dir=base_model_dir(settings),
                data_dir=uss_dir(settings),
                roots=SimulatorSettings.of(settings).data_roots,
                out=folder,
                embed=load_embedder("bundled").embed,
                progress=progress,
            )
    except InvalidInput as exc:
        typer.echo(f"error: {exc.message}", err=True)
        raise typer.Exit(2) from exc
    (folder / "calibration.json").write_text(json.dumps(result.metrics, indent=2) + "\n")
    training = result.metrics["training"]
    typer.echo(f"calibrated in {training['total_seconds']:.0f} s; saved to {folder}")
    if store:
        import asyncio

        from services.core.store.local import put_locally
        from services.simulator.service import KIND, headline

        version = asyncio.run(
            put_locally(
                name,
                KIND,
                headline(result.metrics),
                metadata={"job_id": None, "base_model": result.metrics["base_model"]},
                files=folder,
                note=note or "plaudit simulator calibrate (in-process)",
                make_current=True,
            )
        )
        typer.echo(f'stored as {version.ref} (use it as "calibration": "{version.ref}")')
    typer.echo(summary(result.metrics["realism"]))


@simulator_app.command("evaluate")
def evaluate_command(
    data: DataOption = None,
    calibration: Annotated[
        Path | None, typer.Option(help="a calibration folder (default: only the prompted one)")
    ] = None,
    split: Annotated[
        str, typer.Option(help="test or dev (files without splits: 80/10/10 by id hash)")
    ] = "test",
    per_domain: Annotated[int, typer.Option(min=10, help="held-out contexts per domain")] = 50,
    whole: Annotated[
        int,
        typer.Option("--dialogues", min=0, help="whole simulated dialogues per domain (0: none)"),
    ] = 8,
    max_turns: Annotated[int, typer.Option(min=1, max=64, help="user turns per dialogue")] = 12,
    before: Annotated[bool, typer.Option(help="measure the prompted simulator too")] = True,
    temperature: Annotated[float, typer.Option(min=0, max=2)] = 0.7,
    threads: Annotated[int | None, typer.Option(min=1)] = None,
    seed: Annotated[int, typer.Option()] = 0,
    out: Annotated[Path | None, typer.Option(help="also write the report as JSON here")] = None,
) -> None:
    """Realism of simulated user turns against real ones, per domain, on any USS-format file."""
    import torch

    from plaudit_wire.simulator import CalibrationConfig
    from services.core.errors import InvalidInput
    from services.core.models.embedder import load_embedder
    from services.simulator import data as uss
    from services.simulator.acts import ActModel
    from services.simulator.calibration import measure
    from services.simulator.jobs import base_model_dir, uss_dir
    from services.simulator.model import ADAPTER_DIR
    from services.simulator.predictor import SatisfactionPredictor

    if split not in ("dev", "test"):
        raise typer.BadParameter("test or dev", param_hint="--split")
    settings = _settings()
    if threads is not None:
        torch.set_num_threads(threads)
    config = CalibrationConfig(
        data=data or ["sgd", "mwoz", "ccpe"],
        eval_split=split,
        eval_per_domain=per_domain,
        eval_dialogues=whole,
        dialogue_max_turns=max_turns,
        measure_before=before or calibration is None,
        temperature=temperature,
        seed=seed,
    )
    try:
        dialogues = uss.load(
            config.data, uss_dir(settings), SimulatorSettings.of(settings).data_roots
        )
        if split == "train":
            dialogues = [d for d in dialogues if d.split == "train"]
            config = config.model_copy(update={"eval_split": "test"})
            dialogues = [uss.Dialogue(d.id, d.domain, "test", d.turns) for d in dialogues]
        predictor = SatisfactionPredictor.load(calibration) if calibration else None
        acts = ActModel.load(calibration) if calibration else None
        adapter = calibration / ADAPTER_DIR if calibration else None
        majority = _majority(dialogues)
        with progress_display() as progress:
            report = measure(
                config,
                dialogues,
                base_dir=base_model_dir(settings),
                adapter_dir=adapter if adapter is not None and adapter.is_dir() else None,
                predictor=predictor,
                acts=acts,
                embed=load_embedder("bundled").embed,
                majority=majority,
                progress=progress,
            )
    except InvalidInput as exc:
        typer.echo(f"error: {exc.message}", err=True)
        raise typer.Exit(2) from exc
    typer.echo(summary(report))
    if out is not None:
        out.write_text(json.dumps(report, indent=2) + "\n")


def _majority(dialogues: list[Any]) -> int:
    """The most common rating of the train split (of every turn when it has none; 3 when no
    turn is rated)."""
    from services.simulator import data as uss

    train = uss.examples(uss.in_split(dialogues, "train")) or uss.examples(dialogues)
    levels = [e.satisfaction for e in train if e.satisfaction is not None]
    return max(set(levels), key=levels.count) if levels else 3


def _on_server(server: str, api_key: str | None, body: dict[str, Any]) -> None:
    from services.cli.jobs import run_on_server

    body = {k: v for k, v in body.items() if v is not None}
    result = run_on_server(server, api_key, "/v1/simulator/calibrations", body)
    typer.echo(f"stored as {result['calibration']['ref']}", err=True)
    typer.echo(summary(result["realism"]), err=True)
    typer.echo(json.dumps(result, indent=2))


def _fmt(value: Any, pct: bool = False) -> str:
    if value is None:
        return "n/a"
    return f"{100 * value:.1f}%" if pct else f"{value:.2f}"


def summary(realism: dict[str, Any]) -> str:
    """One line per domain and run: the two-sample accuracy, length W1, question and end
    rates, satisfaction accuracy and macro-F1 beside the majority level's; then the whole
    dialogues."""
    lines = [f"{realism['split']} split, {realism['contexts']} held-out contexts"]
    for run in ("before", "after"):
        if run not in realism:
            continue
        groups = {**realism[run]["domains"], "all": realism[run]["all"]}
        for domain, g in groups.items():
            q, s, e = g["question_rate"], g["satisfaction"], g["end"]
            lines.append(
                f"  {run:6} {domain:5} classifier {_fmt(g['classifier_accuracy'], True)}"
                f"  length W1 {_fmt(g['length_w1'])}"
                f"  questions {_fmt(q['simulated'], True)} (real {_fmt(q['real'], True)})"
                f"  ends {_fmt(e['simulated_rate'], True)} (real {_fmt(e['real_rate'], True)})"
                f"  satisfaction {_fmt(s['accuracy'], True)} / F1 {_fmt(s.get('macro_f1'))}"
                f" (majority {_fmt(s['majority_accuracy'], True)} / "
                f"{_fmt(s.get('majority_macro_f1'))})"
            )
    for run in ("before", "after"):
        if f"dialogues_{run}" in realism:
            lines.extend(dialogue_summary(run, realism[f"dialogues_{run}"]))
    return "\n".join(lines)


def dialogue_summary(run: str, report: dict[str, Any]) -> list[str]:
    """Whole dialogues: user turns, ended share, opening similarity, two-sample accuracy."""
    lines = []
    for domain, g in {**report["domains"], "all": report["all"]}.items():
        real, sim = g["real"], g["simulated"]
        lines.append(
            f"  {run:6} {domain:5} dialogues {sim['dialogues']}: user turns "
            f"{_fmt(sim['mean_user_turns'])} (real {_fmt(real['mean_user_turns'])}, W1 "
            f"{_fmt(g['user_turns_w1'])})  ended {_fmt(sim['ended'], True)} (real "
            f"{_fmt(real['ended'], True)})  first-turn similarity "
            f"{_fmt(sim['first_similarity'])} (real {_fmt(real['first_similarity'])})"
            f"  classifier {_fmt(g['classifier_accuracy'], True)}"
        )
    return lines
