"""The simulator's parts without a model: reading USS dialogues, the role-swapped prompt, how a
generated turn is read, the realism metrics and the satisfaction predictor."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import wasserstein_distance

from services.simulator import data as uss
from services.simulator.predictor import SatisfactionPredictor, fit
from services.simulator.prompting import (
    END_MARKER,
    OPENING_CUE,
    Said,
    read_turn,
    simulator_messages,
)
from services.simulator.realism import classifier_accuracy, distinct_n, question_rate, wasserstein_1
from tests.shared_data import reason, shared_copy

SHARED_USS_DIR = shared_copy("uss", "sgd.jsonl.gz") or Path("missing")

needs_shared = pytest.mark.skipif(
    not (SHARED_USS_DIR / "sgd.jsonl.gz").is_file(), reason=reason("uss")
)


def test_consecutive_turns_of_one_speaker_are_joined(tmp_path: Path) -> None:
    row = {
        "id": "d1",
        "domain": "ccpe",
        "split": "test",
        "turns": [
            {"role": "system", "text": "Do you like Thor?", "satisfaction": None},
            {"role": "user", "text": "No, I don't", "satisfaction": [3, 2, 2]},
            {"role": "user", "text": "like it.", "satisfaction": None},
            {"role": "system", "text": "Why?", "satisfaction": None},
            {"role": "user", "text": "Too loud.", "satisfaction": [1, 2, 1]},
        ],
    }
    path = tmp_path / "x.jsonl.gz"
    with gzip.open(path, "wt") as handle:
        handle.write(json.dumps(row) + "\n")
    [dialogue] = uss.read_file(path)
    assert [t.role for t in dialogue.turns] == ["system", "user", "system", "user"]
    assert dialogue.turns[1].text == "No, I don't like it." and dialogue.turns[1].satisfaction == 2
    first, last = uss.examples([dialogue])
    assert (first.last_system, first.is_last) == ("Do you like Thor?", False)
    assert (last.text, last.satisfaction, last.is_last) == ("Too loud.", 1, True)


def test_bad_files_are_clear_errors(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"turns": [{"role": "robot", "text": "hi"}]}\n')
    with pytest.raises(uss.DialogueDataError, match="role 'user' or 'system'"):
        uss.read_file(path)
    with pytest.raises(uss.DialogueDataError, match="neither sgd"):
        uss.resolve_source("/etc/passwd", tmp_path)


@needs_shared
def test_the_shared_files_have_their_documented_splits() -> None:
    dialogues = uss.load(["ccpe"], SHARED_USS_DIR)
    assert len(dialogues) == 500
    assert {d.split for d in dialogues} == {"train", "dev", "test"}
    assert all(d.domain == "ccpe" for d in dialogues)


def test_the_prompt_swaps_roles_and_opens_with_a_cue() -> None:
    opening = simulator_messages("You want a hotel.", [])
    assert [m["role"] for m in opening] == ["system", "user"]
    assert opening[1]["content"] == OPENING_CUE and "You want a hotel." in opening[0]["content"]
    history = [Said(True, "I need a hotel."), Said(False, "Which area?")]
    messages = simulator_messages("You want a hotel.", history)
    assert [(m["role"], m["content"]) for m in messages[1:]] == [
        ("user", OPENING_CUE),
        ("assistant", "I need a hotel."),
        ("user", "Which area?"),
    ]


def test_reading_a_turn_finds_the_end() -> None:
    marked = read_turn(f"Great, book it. {END_MARKER}")
    assert (marked.text, marked.done, marked.done_reason) == ("Great, book it.", True, "end_marker")
    closing = read_turn("No, that's all, thanks.")
    assert (closing.done, closing.done_reason) == (True, "closing_phrase")
    asking = read_turn("What is the phone number? That's all I need to know before I go there.")
    assert not asking.done
    assert read_turn("User: Is it cheap?").text == "Is it cheap?"


def test_wasserstein_matches_scipy() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.integers(1, 30, 50).tolist(), rng.integers(3, 40, 37).tolist()
    assert wasserstein_1(a, b) == pytest.approx(wasserstein_distance(a, b))
    assert wasserstein_1([5, 5], [5]) == 0


def test_question_rate_and_distinct_n() -> None:
    assert question_rate(["Is it open?", "Book it.", "Why?", "ok"]) == 0.5
    assert distinct_n(["a b a b"], 1) == 0.5
    assert distinct_n(["a b a b"], 2) == pytest.approx(2 / 3)


def test_the_two_sample_classifier_tells_apart_only_what_differs() -> None:
    rng = np.random.default_rng(0)
    same_a, same_b = rng.normal(size=(80, 8)), rng.normal(size=(80, 8))
    shifted = rng.normal(loc=1.5, size=(80, 8))
    alike = classifier_accuracy(same_a.astype(np.float32), same_b.astype(np.float32))
    apart = classifier_accuracy(same_a.astype(np.float32), shifted.astype(np.float32))
    assert alike is not None and apart is not None
    assert alike < 0.65 and apart > 0.9
    assert classifier_accuracy(same_a[:5].astype(np.float32), same_b[:5].astype(np.float32)) is None


def test_the_predictor_round_trips_through_json(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    x = np.vstack([rng.normal(-1, 1, (40, 4)), rng.normal(1, 1, (40, 4))])
    y = [2] * 40 + [4] * 40
    predictor = fit(x, y)
    dist = predictor.distribution(x)
    assert dist.shape == (80, 5) and np.allclose(dist.sum(axis=1), 1)
    assert dist[:, [0, 2, 4]].max() == 0  # levels never seen
    assert (dist[:40, 1] > 0.5).mean() > 0.8 and (dist[40:, 3] > 0.5).mean() > 0.8
    predictor.save(tmp_path)
    again = SatisfactionPredictor.load(tmp_path)
    assert np.allclose(again.distribution(x), dist)
