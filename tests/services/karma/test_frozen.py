"""The frozen-encoder KARMA method (issue 24): its text features, the on-disk embedding cache,
a real tiny training run with the bundled MiniLM, the saved model loading and scoring, and the
evaluation's length-matched measure, each on small fixed data."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from plaudit_wire.karma import KarmaTrainConfig
from services.core.errors import InvalidInput
from services.karma.data import Pair, Reply
from services.karma.embedding_cache import EmbeddingCache, Matrix, MiniLMEncoder
from services.karma.evaluation import length_matched, pair_metrics, subset_accuracy
from services.karma.frozen import FrozenKarmaModel, encoder_path
from services.karma.model import load_model
from services.karma.text_features import FEATURE_NAMES, reading_ease, reply_features
from services.karma.training import TrainResult, train_karma

TOPICS = ["majors", "dorms", "finals", "internships", "office hours", "roommates"]
TOPICS += ["scholarships", "transfers", "labs", "advisors", "clubs", "grad school"]


# --- features and measures on fixed data ------------------------------------------------------


def _named(values: list[float]) -> dict[str, float]:
    return dict(zip(FEATURE_NAMES, values, strict=True))


def test_reply_features_name_structure_tone_and_overlap() -> None:
    reply = "Thanks! Have you tried office hours?\n\n- go early\n- bring questions"
    features = _named(reply_features(reply, ("Calc", "Do office hours help?")))
    assert features["questions"] == pytest.approx(0.2)  # one question mark of at most five
    assert features["ends_with_question"] == 0.0
    assert features["list_lines"] == pytest.approx(0.2)  # two list lines of at most ten
    assert features["exclamations"] == pytest.approx(0.2)
    assert features["log_paragraphs"] == pytest.approx(np.log1p(2))
    # reply words of 3+ letters: thanks have you tried office hours early bring questions
    assert features["overlap_last"] == pytest.approx(2 / 9)  # office, hours
    assert features["overlap_first"] == 0.0
    assert features["polite_rate"] == pytest.approx(1 / 10) and features["you_rate"] > 0
    hedged = _named(reply_features("Maybe you could try", ("q",)))
    assert hedged["hedge_rate"] == pytest.approx(0.5)  # maybe, could
    assert hedged["ends_with_question"] == 0.0 and hedged["is_reply_to_turn"] == 0.0


def test_reading_ease_is_higher_for_short_plain_words() -> None:
    plain = reading_ease(["the", "cat", "sat", "on", "the", "mat"], 1)
    dense = reading_ease(["institutional", "considerations", "notwithstanding"], 1)
    assert plain > 100 > 0 > dense


def test_length_matched_means_within_20_percent_of_the_longer() -> None:
    assert length_matched("a" * 100, "b" * 80) and length_matched("b" * 80, "a" * 100)
    assert not length_matched("a" * 100, "b" * 79)
    assert length_matched("", "")
    kept = subset_accuracy([2.0, 1.0, 3.0, 0.0], [1.0, 2.0, 3.0, 1.0], [True, True, True, False])
    assert kept == {"pairs": 3, "accuracy": pytest.approx(0.5)}  # win, loss, tie
    assert subset_accuracy([1.0], [0.0], [False]) == {"pairs": 0, "accuracy": None}


def _reply(rid: str, text: str, score: float) -> Reply:
    return Reply(rid, "t", "t", ("title",), text, score, "test")


def test_pair_metrics_report_the_length_matched_pairs() -> None:
    pairs = [
        Pair(_reply("a", "x" * 50, 10), _reply("b", "y" * 45, 2)),  # matched
        Pair(_reply("c", "x" * 10, 10), _reply("d", "y" * 40, 2)),  # not matched
        Pair(_reply("e", "x" * 30, 9), _reply("f", "y" * 33, 1)),  # matched
    ]
    scores = {"a": 1.0, "b": 0.0, "c": 1.0, "d": 0.0, "e": 0.0, "f": 1.0}
    result = pair_metrics(pairs, scores)
    assert result["pair_accuracy"] == pytest.approx(2 / 3)
    assert result["length_matched"] == {"pairs": 2, "accuracy": pytest.approx(0.5)}
    lengths = {r.id: float(len(r.text)) for p in pairs for r in (p.preferred, p.other)}
    length = pair_metrics(pairs, lengths)["length_matched"]
    assert length == {"pairs": 2, "accuracy": pytest.approx(0.5)}  # a over b wins, e over f loses


# --- the embedding cache with the real MiniLM ---------------------------------------------------


class _Counting:
    """The real encoder, counting the texts it is asked to embed."""

    def __init__(self, encoder: MiniLMEncoder) -> None:
        self.inner, self.texts = encoder, 0

    @property
    def key(self) -> str:
        return self.inner.key

    @property
    def dimension(self) -> int:
        return self.inner.dimension

    def encode(self, texts: list[str]) -> Matrix:
        self.texts += len(texts)
        return self.inner.encode(texts)


@pytest.fixture(scope="module")
def minilm() -> MiniLMEncoder:
    return MiniLMEncoder(encoder_path("bundled"), max_seq_length=64)


def test_the_cache_embeds_each_text_once_and_keeps_it_on_disk(
    minilm: MiniLMEncoder, tmp_path: Path
) -> None:
    counting = _Counting(minilm)
    cache = EmbeddingCache(tmp_path, counting)
    texts = ["How do I pick a major?", "Take intro classes.", "How do I pick a major?"]
    reports: list[tuple[int, int, str]] = []
    assert cache.ensure(texts, progress=lambda *r: reports.append(r)) == 2 and counting.texts == 2
    characters = len(texts[0]) + len(texts[1])  # progress counts characters, not texts
    assert reports == [(characters, characters, "embed characters")]
    assert cache.ensure(texts) == 0 and counting.texts == 2
    again = EmbeddingCache(tmp_path, counting)  # a new process reads the shards
    assert len(again) == 2 and again.ensure(texts[:2]) == 0 and counting.texts == 2
    direct = minilm.encode(texts)
    np.testing.assert_allclose(again.vectors(texts), direct, atol=2e-3)  # float16 on disk
    with pytest.raises(KeyError):
        again.vectors(["never embedded"])


def test_an_encoder_cut_to_its_first_layers_is_keyed_apart(minilm: MiniLMEncoder) -> None:
    """Issue 24: ``encoder_layers`` runs the first N layers; its vectors differ from the whole
    model's, so the cache must never hand one out for the other."""
    cut = MiniLMEncoder(encoder_path("bundled"), max_seq_length=64, layers=2)
    assert cut.key == f"{minilm.key}:L2" and cut.dimension == minilm.dimension
    texts = ["How do I pick a major?", "Take intro classes."]
    whole, short = minilm.encode(texts), cut.encode(texts)
    np.testing.assert_allclose(np.linalg.norm(short, axis=1), 1.0, atol=1e-5)
    assert float(np.sum(whole * short, axis=1).max()) < 0.99
    with pytest.raises(InvalidInput, match="has 6 layers"):
        MiniLMEncoder(encoder_path("bundled"), layers=7)


# --- a real tiny training run ------------------------------------------------------------------


def _rows() -> list[dict[str, Any]]:
    rows = []
    for i, topic in enumerate(TOPICS):
        split = "train" if i < 8 else ("dev" if i < 10 else "test")
        replies = [
            (f"Start early with {topic}: ask someone a year ahead what they wish they knew.", 40),
            (f"It depends on your school, but {topic} gets easier after the first month.", 12),
            ("Just wing it.", 3),
            ("lol", 1),
        ]
        for reply, score in replies:
            rows.append(
                {
                    "context": f"Any advice about {topic} for a first-year student?",
                    "reply": reply,
                    "score": score,
                    "thread_id": f"t{i}",
                    "split": split,
                    "metadata": {"subreddit": "College", "depth": 0},
                }
            )
    return rows


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[TrainResult, Path, Path]:
    root = tmp_path_factory.mktemp("karma-frozen")
    data = root / "scored.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in _rows()))
    config = _config(data, root / "model")
    result = train_karma(config, data_dir=root, models_dir=root, cache_dir=root / "cache")
    return result, data, root


def _config(data: Path, out: Path) -> KarmaTrainConfig:
    return KarmaTrainConfig(
        method="frozen",
        data=str(data),
        output_dir=out,
        head_epochs=30,
        head_batch_size=16,
        encoder_max_length=64,
        spearman_threads=5,
        threads=2,
    )


def test_frozen_trains_on_every_pair_by_default(
    trained: tuple[TrainResult, Path, Path],
) -> None:
    result, _, _ = trained
    assert KarmaTrainConfig().method == "frozen"  # issue 24: chosen on the dev split
    assert KarmaTrainConfig().encoder_depth() == 3  # the bundled MiniLM's first three layers
    assert KarmaTrainConfig(encoder="~/my-encoder").encoder_depth() is None  # another: all
    assert KarmaTrainConfig(encoder_layers=0).encoder_depth() is None
    assert json.loads((result.path / "karma.json").read_text())["encoder_layers"] == 3
    assert {p.name for p in result.path.iterdir()} == {
        "karma.json",
        "head.safetensors",
        "metrics.json",
    }
    metrics = json.loads((result.path / "metrics.json").read_text())
    training = metrics["training"]
    assert metrics["method"] == "frozen" and training["sibling_pairs"] == 8 * 6
    assert training["texts_embedded"] > 0 and len(training["loss_log"]) == 30
    assert training["loss_log"][-1]["loss"] < training["loss_log"][0]["loss"]
    evaluation = metrics["evaluation"]
    assert evaluation["pairs"] == 12  # two test threads, six pairs each
    assert evaluation["pair_accuracy"] >= 0.9  # unseen topics, same kinds of replies
    assert set(evaluation["length_matched"]) == {"pairs", "accuracy"}


def test_the_saved_model_loads_and_scores_as_trained(
    trained: tuple[TrainResult, Path, Path],
) -> None:
    result, _, _ = trained
    model = load_model(result.path)
    assert isinstance(model, FrozenKarmaModel) and model.variant == "context_only"
    replies = ["Start early with labs: ask a senior what they wish they knew.", "lol"]
    good, bad = model.score("Any advice about labs for a first-year student?", replies)
    assert good > bad
    messages = [{"role": "user", "content": "Any advice about labs?"}]
    assert len(model.score(messages, replies)) == 2
    assert model.metrics()["evaluation"]["pairs"] == 12


def test_a_second_run_embeds_nothing_new(trained: tuple[TrainResult, Path, Path]) -> None:
    _, data, root = trained
    config = _config(data, root / "again").model_copy(update={"head_epochs": 1})
    again = train_karma(config, data_dir=root, models_dir=root, cache_dir=root / "cache")
    assert again.metrics["training"]["texts_embedded"] == 0


def test_the_text_features_alone_train_without_an_encoder(
    trained: tuple[TrainResult, Path, Path],
) -> None:
    """``encoder: none`` (the ablation beside the embeddings): no encoder, no cache."""
    _, data, root = trained
    config = _config(data, root / "no-encoder").model_copy(update={"encoder": "none"})
    result = train_karma(config, data_dir=root, models_dir=root, cache_dir=root / "unused")
    assert result.metrics["training"]["texts_embedded"] == 0 and not (root / "unused").exists()
    model = load_model(result.path)
    assert isinstance(model, FrozenKarmaModel) and model.card.encoder == "none"
    good, bad = model.score("Any advice about labs?", ["Start early: ask a senior.", "lol"])
    assert good != bad


def test_a_model_on_the_first_layers_loads_them_again(
    trained: tuple[TrainResult, Path, Path],
) -> None:
    _, data, root = trained
    config = _config(data, root / "two-layers").model_copy(update={"encoder_layers": 2})
    result = train_karma(config, data_dir=root, models_dir=root, cache_dir=root / "cache")
    assert result.metrics["training"]["texts_embedded"] > 0  # its own vectors, not the cached
    model = load_model(result.path)
    assert isinstance(model, FrozenKarmaModel) and model.card.encoder_layers == 2
    assert model.featurizer.encoder.key.endswith(":L2")  # the card's cut, not the whole model
    good, bad = model.score("Any advice about labs?", ["Ask a senior early.", "lol"])
    assert good != bad
