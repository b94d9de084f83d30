"""Issue 24's measures and fitted parts on small fixed data: macro-F1 and the satisfaction
report, the predictor's cue features, the act model (end threshold, per-domain question rate),
the act-conditioned prompt and rewrites, and whole-dialogue realism."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from sklearn.metrics import f1_score

from judges.backends.base import GenerateRequest, GenerateResult
from services.simulator.acts import (
    ActModel,
    Acts,
    Context,
    features,
    fit_acts,
    threshold_for_rate,
)
from services.simulator.data import DOMAIN_GOALS
from services.simulator.dialogues import (
    WholeDialogue,
    cut,
    dialogue_report,
    mean_pairwise_similarity,
)
from services.simulator.predictor import SatisfactionPredictor, class_weights, cues, fit
from services.simulator.predictor import features as predictor_features
from services.simulator.prompting import END_MARKER, simulator_messages
from services.simulator.realism import macro_f1, satisfaction_report
from services.simulator.rollout import Sampling, UserModel, write_turns


def test_macro_f1_matches_sklearn_and_punishes_always_the_majority() -> None:
    gold = [3, 3, 3, 3, 3, 3, 2, 2, 4, 1]
    guess = [3, 3, 3, 2, 3, 3, 2, 3, 4, 3]
    assert macro_f1(gold, guess) == pytest.approx(f1_score(gold, guess, average="macro"))
    always = [3] * len(gold)
    assert macro_f1(gold, always) == pytest.approx(f1_score(gold, always, average="macro"))
    # 0.6 accuracy but one class of four: F1 3 = 0.75, the rest 0
    assert macro_f1(gold, always) == pytest.approx(0.75 / 4)


def test_the_satisfaction_report_sets_the_predictor_beside_the_majority() -> None:
    rated = [(3, 3), (3, 3), (3, 2), (2, 2), (1, 1)]
    got = satisfaction_report(rated, majority=3)
    assert got["rated"] == 5 and got["accuracy"] == pytest.approx(0.8)
    assert got["majority_accuracy"] == pytest.approx(0.6)
    assert got["macro_f1"] == pytest.approx(
        f1_score([3, 3, 3, 2, 1], [3, 3, 2, 2, 1], average="macro")
    )
    assert got["majority_macro_f1"] == pytest.approx(0.25)
    assert satisfaction_report([], majority=3)["accuracy"] is None


def test_the_cue_features_read_repairs_thanks_and_apologies() -> None:
    unhappy = cues("Sorry, there are no results.", "No, that's wrong, I said Tuesday")
    happy = cues("Your table is booked.", "Great, thanks!")
    assert unhappy[0] >= 3 and unhappy[2] == 1 and unhappy[1] == 0
    assert happy[0] == 0 and happy[1] == 1 and happy[2] == 0
    a, r = np.ones((2, 3), np.float32), np.full((2, 3), 2, np.float32)
    texts = (["Sorry.", "Booked."], ["No.", "Thanks"])
    assert predictor_features(a, r, texts, "cues").shape == (2, 3 * 3 + len(happy))
    assert predictor_features(a, r, None, "embeddings").shape == (2, 6)
    with pytest.raises(ValueError):
        predictor_features(a, r, None, "cues")


def test_a_predictor_keeps_its_feature_set_and_old_files_load(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    x = np.vstack([rng.normal(-1, 1, (40, 4)), rng.normal(1, 1, (40, 4))])
    predictor = fit(x, [3] * 70 + [1] * 10, feature_set="cues")
    assert predictor.feature_set == "cues"
    # class weights: the rare level is still predicted where it lives
    assert (predictor.distribution(x[70:]).argmax(axis=1) == 0).mean() > 0.5
    predictor.save(tmp_path)
    assert SatisfactionPredictor.load(tmp_path).feature_set == "cues"
    old = (tmp_path / "predictor.json").read_text().replace('"feature_set": "cues", ', "")
    (tmp_path / "predictor.json").write_text(old)
    assert SatisfactionPredictor.load(tmp_path).feature_set == "embeddings"


def test_the_end_threshold_keeps_the_rate() -> None:
    scores = np.asarray([0.9, 0.1, 0.5, 0.7, 0.2, 0.3, 0.05, 0.6, 0.4, 0.8])
    assert threshold_for_rate(scores, 0.2) == 0.8
    assert (scores >= threshold_for_rate(scores, 0.3)).sum() == 3
    assert threshold_for_rate(scores, 0.0) == float("inf")


def _contexts(n: int, seed: int) -> tuple[list[Context], list[Acts]]:
    """Fixed synthetic contexts: sgd users ask at 40%, mwoz at 10%; users end exactly where
    the assistant asks 'anything else?'."""
    rng = random.Random(seed)
    contexts, acts = [], []
    for k in range(n):
        domain = "sgd" if k % 2 else "mwoz"
        wrap = rng.random() < 0.1
        said = "Is there anything else I can help with?" if wrap else "The train leaves at 9."
        contexts.append(Context(DOMAIN_GOALS[domain], said, rng.randrange(8)))
        asks = rng.random() < (0.4 if domain == "sgd" else 0.1)
        acts.append(Acts(end=wrap, question=asks))
    return contexts, acts


def _vectors(n: int) -> npt.NDArray[np.float32]:
    return np.zeros((n, 4), np.float32)  # no text signal: only the scalars carry it


def test_the_act_model_ends_where_real_users_do_and_keeps_each_domains_question_rate(
    tmp_path: Path,
) -> None:
    contexts, acts = _contexts(2000, seed=0)
    model = fit_acts(features(contexts, _vectors(len(contexts))), acts)
    model.save(tmp_path)
    loaded = ActModel.load(tmp_path)
    assert loaded is not None
    test, truth = _contexts(2000, seed=1)
    chosen = loaded.decide(features(test, _vectors(len(test))), random.Random(0))
    assert [a.end for a in chosen] == [a.end for a in truth]
    for domain, real in (("sgd", 0.4), ("mwoz", 0.1)):
        rows = [k for k, c in enumerate(test) if c.goal == DOMAIN_GOALS[domain]]
        rate = sum(chosen[k].question for k in rows) / len(rows)
        assert abs(rate - real) < 0.05, (domain, rate)
    assert ActModel.load(tmp_path / "none") is None


def test_the_prompt_names_the_acts() -> None:
    [system, *_] = simulator_messages("goal", [], Acts(end=True, question=False))
    assert "do not ask a question" in system["content"]
    assert f"end the conversation with {END_MARKER}" in system["content"]
    [plain, *_] = simulator_messages("goal", [])
    assert "Next message" not in plain["content"]


class _Scripted:
    """A runtime that answers each prompt from a queue of texts keyed by the act line (unit
    test of the rewrite logic only)."""

    def __init__(self, answers: dict[str, list[str]]) -> None:
        self.answers = answers
        self.calls = 0

    def generate(self, requests: Sequence[GenerateRequest]) -> list[GenerateResult]:
        self.calls += 1
        out = []
        for request in requests:
            line = str(request.messages[0]["content"]).splitlines()[-1]
            out.append(GenerateResult(status="ok", text=self.answers[line].pop(0)))
        return out


def test_a_turn_that_disagrees_with_its_question_act_is_rewritten() -> None:
    ask = "Next message: ask a question, and do not end the conversation."
    end = f"Next message: do not ask a question, and end the conversation with {END_MARKER}."
    runtime: Any = _Scripted({ask: ["I want a train.", "When does it leave?"], end: ["Bye."]})
    acts = [Acts(False, True), Acts(True, False)]
    sampling = Sampling(max_new_tokens=8, temperature=0.7, act_retries=2, seed=0)
    turns = write_turns(UserModel(runtime), [("g", []), ("g", [])], acts, sampling)
    assert [t.text for t in turns] == ["When does it leave?", "Bye."]
    assert [(t.done, t.done_reason) for t in turns] == [(False, None), (True, "end_marker")]
    assert runtime.calls == 2


def _embed(texts: list[str]) -> npt.NDArray[np.float32]:
    """A fixed toy embedding: letter counts (a-z), so equal texts embed alike."""
    rows = [[t.lower().count(chr(97 + i)) + 0.01 for i in range(26)] for t in texts]
    return np.asarray(rows, np.float32)


def test_whole_dialogue_realism_on_fixed_dialogues() -> None:
    real = [
        cut("sgd", ["Find me a flight", "To Paris", "Thanks, bye"], 4),
        cut("sgd", ["What's the weather", "Tomorrow?", "OK", "Fine", "Bye now"], 4),
    ]
    assert real[1] == WholeDialogue("sgd", ("What's the weather", "Tomorrow?", "OK", "Fine"), False)
    simulated = [
        WholeDialogue("sgd", ("Hello", "Hello"), True),
        WholeDialogue("sgd", ("Hello",), True),
    ]
    got = dialogue_report(real, simulated, _embed, max_turns=4)
    sgd = got["domains"]["sgd"]
    assert got["all"] == sgd
    assert sgd["real"]["mean_user_turns"] == 3.5 and sgd["simulated"]["mean_user_turns"] == 1.5
    assert sgd["user_turns_w1"] == pytest.approx(2.0)
    assert sgd["real"]["ended"] == 0.5 and sgd["simulated"]["ended"] == 1.0
    assert sgd["simulated"]["first_distinct_1"] == 0.5  # "hello" twice
    assert sgd["simulated"]["first_similarity"] == pytest.approx(1.0)
    assert sgd["real"]["first_similarity"] < 0.9
    assert sgd["classifier_accuracy"] is None  # fewer than 10 a side


def test_the_whole_dialogue_classifier_tells_repetitive_users_apart() -> None:
    rng = random.Random(0)
    words = [
        "flight",
        "train",
        "hotel",
        "paris",
        "london",
        "cheap",
        "tomorrow",
        "morning",
        "table",
        "four",
    ]
    real = [
        WholeDialogue("mwoz", tuple(" ".join(rng.sample(words, 3)) for _ in range(3)), True)
        for _ in range(20)
    ]
    simulated = [WholeDialogue("mwoz", ("zzz qqq",) * 3, True) for _ in range(20)]
    got = dialogue_report(real, simulated, _embed, max_turns=4)
    assert got["all"]["classifier_accuracy"] > 0.9


def test_pairwise_similarity() -> None:
    assert mean_pairwise_similarity(np.eye(3, dtype=np.float32)) == pytest.approx(0.0)
    assert mean_pairwise_similarity(np.ones((1, 3), np.float32)) is None


def test_class_weights_are_a_power_of_inverse_frequency() -> None:
    labels = np.asarray([3, 3, 3, 1])
    assert class_weights(labels, 1.0) == pytest.approx({1: 2.0, 3: 4 / 6})
    assert class_weights(labels, 0.5) == pytest.approx({1: 2.0**0.5, 3: (4 / 6) ** 0.5})
    assert class_weights(labels, 0.0) == {1: 1.0, 3: 1.0}
