"""Train the frozen-encoder KARMA model (frozen.py) on every training pair in CPU minutes.

The texts of every chosen pair are embedded once (cached on disk by content hash, so a second
run embeds nothing), then the head is fitted with the Bradley-Terry loss
``-log sigmoid(r_preferred - r_other)`` over the sibling pairs and, with ``rank_fraction``, the
within-thread ranking pairs (issue 24). The ranking pairs are drawn among the replies the
sibling pairs already use, so the term costs no extra embedding. The model directory is written
atomically, as for the fine-tuned model.
"""

from __future__ import annotations

import os
import resource
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from judges.model_worker import loading_lock
from services.karma.data import KarmaData
from services.karma.embedding_cache import EmbeddingCache, Matrix, NoEncoder
from services.karma.evaluation import EvalOptions, evaluate
from services.karma.features import KarmaInput, from_reply
from services.karma.frozen import FrozenCard, FrozenKarmaModel, build_head, load_encoder
from services.karma.frozen import input_width as head_width
from services.karma.selection import TrainingPair, training_pairs

if TYPE_CHECKING:
    import torch

    from plaudit_wire.karma import KarmaTrainConfig

ProgressFn = Callable[[int, int, str], None]


@dataclass(frozen=True)
class HeadFit:
    seconds: float
    epochs: int
    log: list[dict[str, float]]


def pair_pool(train: KarmaData) -> KarmaData:
    """The training split limited to the replies its sibling pairs use (see the docstring)."""
    used = {r.id: r for p in train.pairs for r in (p.preferred, p.other)}
    return KarmaData(replies=list(used.values()), pairs=train.pairs, source=train.source)


def pair_inputs(
    chosen: Sequence[TrainingPair],
) -> tuple[list[KarmaInput], list[bool], np.ndarray[Any, Any]]:
    """Unique inputs (by reply and order-blindness), their blindness, and pair index rows."""
    index: dict[tuple[str, bool], int] = {}
    inputs: list[KarmaInput] = []
    blind: list[bool] = []
    pairs = []
    for item in chosen:
        row = []
        for reply in (item.pair.preferred, item.pair.other):
            key = (reply.id, item.order_blind)
            if key not in index:
                index[key] = len(inputs)
                inputs.append(from_reply(reply))
                blind.append(item.order_blind)
            row.append(index[key])
        pairs.append(row)
    return inputs, blind, np.asarray(pairs, dtype=np.int64).reshape(-1, 2)


def feature_rows(
    model: FrozenKarmaModel, inputs: Sequence[KarmaInput], blind: Sequence[bool]
) -> Matrix:
    """Head-input rows of ``inputs``, each with its own order-blindness."""
    rows = np.zeros((len(inputs), 0), np.float32)
    for flag in (True, False):
        chosen = [i for i, b in enumerate(blind) if b == flag]
        if not chosen:
            continue
        part = model.featurizer.rows([inputs[i] for i in chosen], order_blind=flag)
        if rows.shape[1] == 0:
            rows = np.zeros((len(inputs), part.shape[1]), np.float32)
        rows[chosen] = part
    return rows


def fit_head(
    head: torch.nn.Module,
    rows: Matrix,
    pairs: np.ndarray[Any, Any],
    config: KarmaTrainConfig,
    report: ProgressFn,
) -> HeadFit:
    """Standardize the inputs, then Adam on the Bradley-Terry loss over the pairs."""
    import torch
    import torch.nn.functional as F

    torch.manual_seed(config.seed)
    x = torch.from_numpy(rows)
    head.get_buffer("mean").copy_(x.mean(0))
    head.get_buffer("scale").copy_(x.std(0).clamp_min(1e-4))
    index = torch.from_numpy(pairs)
    optimizer = torch.optim.AdamW(
        head.parameters(), lr=config.head_learning_rate, weight_decay=config.weight_decay
    )
    epochs, log, started = config.head_epochs, [], time.monotonic()
    generator = torch.Generator().manual_seed(config.seed)
    head.train()
    for epoch in range(epochs):
        total = 0.0
        order = torch.randperm(len(index), generator=generator)
        for batch in torch.split(order, config.head_batch_size):
            chosen = index[batch]
            loss = -F.logsigmoid(head(x[chosen[:, 0]]) - head(x[chosen[:, 1]])).mean()
            optimizer.zero_grad()
            torch.autograd.backward(loss)
            optimizer.step()
            total += loss.item() * len(batch)
        log.append({"epoch": epoch + 1, "loss": round(total / max(len(index), 1), 5)})
        report(epoch + 1, epochs, "train")
    head.eval()
    return HeadFit(time.monotonic() - started, epochs, log)


def train_frozen(
    config: KarmaTrainConfig,
    data: KarmaData,
    out: Path,
    cache_dir: Path,
    report: ProgressFn,
) -> tuple[FrozenKarmaModel, dict[str, Any]]:
    """Embed, fit, evaluate on ``config.eval_split`` and save to ``out``; the model, metrics."""
    import torch

    started = time.monotonic()
    if config.threads is not None:
        torch.set_num_threads(config.threads)
    model, cache = _new_model(config, cache_dir)
    train = data.split("train")
    limit = None if config.max_train_pairs in (None, 0) else config.max_train_pairs
    chosen = training_pairs(pair_pool(train), limit, config.rank_fraction, config.seed)
    inputs, blind, pairs = pair_inputs(chosen)
    embed_started, embedded = time.monotonic(), _prefill(cache, inputs, report)
    embed_seconds = time.monotonic() - embed_started
    rows = feature_rows(model, inputs, blind)
    fit = fit_head(model.head, rows, pairs, config, report)
    report(0, 1, "evaluate")
    options = EvalOptions(config.eval_max_pairs, config.spearman_threads, seed=config.seed)
    evaluation = evaluate(model, data.split(config.eval_split), options, report)
    training = _training_metrics(chosen, fit, embed_seconds, embedded, time.monotonic() - started)
    metrics = _metrics(config, data, evaluation, training)
    report(0, 1, "save")
    _write_atomically(out, model, metrics)
    report(1, 1, "save")
    return model, metrics


def _new_model(
    config: KarmaTrainConfig, cache_dir: Path
) -> tuple[FrozenKarmaModel, EmbeddingCache | None]:
    from services.karma.training import _device  # the fine-tuning's choice; imports this lazily

    with loading_lock():
        encoder = load_encoder(
            config.encoder,
            max_seq_length=config.encoder_max_length,
            layers=config.encoder_depth(),
            device=_device(config),
        )
    card = FrozenCard(
        variant=config.variant,
        encoder=config.encoder,
        max_seq_length=config.encoder_max_length,
        encoder_layers=config.encoder_depth(),
        hidden=config.head_hidden,
        dropout=config.head_dropout,
    )
    import torch

    torch.manual_seed(config.seed)
    head = build_head(head_width(card, encoder.dimension), card.hidden, card.dropout)
    cache = None if isinstance(encoder, NoEncoder) else EmbeddingCache(cache_dir, encoder)
    return FrozenKarmaModel(card, head, encoder, cache=cache), cache


def _prefill(cache: EmbeddingCache | None, inputs: Sequence[KarmaInput], report: ProgressFn) -> int:
    if cache is None:
        return 0
    texts = [i.reply for i in inputs]
    for item in inputs:
        turns = item.turns()
        texts += [turns[0], turns[-1]]
    return cache.ensure(texts, progress=report)


def _training_metrics(
    chosen: Sequence[TrainingPair], fit: HeadFit, embed_seconds: float, embedded: int, total: float
) -> dict[str, Any]:
    import torch

    ranking = sum(not t.order_blind for t in chosen)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "method": "frozen",
        "train_seconds": round(fit.seconds, 1),
        "embed_seconds": round(embed_seconds, 1),
        "texts_embedded": embedded,
        "total_seconds": round(total, 1),
        "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 1),
        "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
        "torch_threads": torch.get_num_threads(),
        "epochs": fit.epochs,
        "steps": fit.epochs,
        "sibling_pairs": len(chosen) - ranking,
        "ranking_pairs": ranking,
        "loss_log": fit.log,
    }


def _metrics(
    config: KarmaTrainConfig,
    data: KarmaData,
    evaluation: dict[str, Any],
    training: dict[str, Any],
) -> dict[str, Any]:
    import torch

    return {
        "variant": config.variant,
        "method": "frozen",
        "base_model": config.encoder,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "evaluation": evaluation,
        "training": training,
        "data": data.summary(),
        "params": config.model_dump(mode="json"),
        "versions": {"torch": torch.__version__},
    }


def _write_atomically(out: Path, model: FrozenKarmaModel, metrics: dict[str, Any]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".partial", dir=out.parent))
    try:
        model.save(partial, metrics)
        os.rename(partial, out)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    model.path = out
