"""The calibrated simulator's act model: whether the user's next turn ends the dialogue and
whether it asks a question, decided from the context before the turn is written (issue 24).

A 135M chat model tuned for a few dozen LoRA steps learns the words of real users but not how
often they ask or when they leave: the first calibration asked at 10% of contexts against the
real 27.5% and never ended. So the calibrated simulator splits the decision from the wording,
as act-based user simulators do (an act is chosen, then realised in words; Schatzmann et al.,
"Agenda-based user simulation", 2007): two logistic regressions on the context (the last
assistant turn's embedding, where the dialogue stands, the domain) predict the two acts; the
LoRA is trained with the real turn's acts written in its instructions and, when simulating,
is given the acts the model chose.

* ending: a real user ends where the assistant has finished ("anything else?"), so the end
  decision is deterministic: the model's probability against a threshold set on the train
  split so that the share of contexts ended there equals the real share;
* asking: drawn with the predicted probability. A logistic regression with one indicator per
  domain matches the real rate of each domain on its training data (its score equations), so
  the drawn rate keeps the real per-domain question rate.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from services.simulator.data import DOMAIN_GOALS, UserTurnExample

Floats = npt.NDArray[np.float64]
Vectors = npt.NDArray[np.float32]
FILE = "acts.json"
OPENING = "(the conversation starts)"
_DOMAINS = tuple(sorted(DOMAIN_GOALS))
_WRAP_UP = ("anything else", "else i can", "is there anything", "have a great", "have a nice")


@dataclass(frozen=True, slots=True)
class Acts:
    """What the next user turn does."""

    end: bool
    question: bool


@dataclass(frozen=True, slots=True)
class Context:
    """Where the dialogue stands before a user turn (what the act model reads)."""

    goal: str
    last_assistant: str | None
    user_turns_before: int

    @classmethod
    def of(cls, item: UserTurnExample) -> Context:
        return cls(item.goal, item.last_system, sum(t.role == "user" for t in item.history))


def real_acts(text: str, is_last: bool) -> Acts:
    return Acts(end=is_last, question="?" in text)


def scalars(context: Context) -> list[float]:
    """Position, the assistant turn's shape and the domain (one indicator each; none for a
    goal that is not one of the shared domains')."""
    said = context.last_assistant or ""
    lowered = said.lower()
    domain = [float(DOMAIN_GOALS[d] == context.goal) for d in _DOMAINS]
    return [
        math.log1p(context.user_turns_before),
        float(context.last_assistant is None),
        float("?" in said),
        math.log1p(len(said.split())),
        float(any(cue in lowered for cue in _WRAP_UP)),
        *domain,
    ]


def context_texts(contexts: Sequence[Context]) -> list[str]:
    """The text each context's embedding is of (the last assistant turn)."""
    return [c.last_assistant or OPENING for c in contexts]


def features(contexts: Sequence[Context], vectors: Vectors) -> Floats:
    rows = np.asarray([scalars(c) for c in contexts], dtype=np.float64)
    return np.concatenate([vectors.astype(np.float64), rows.reshape(len(contexts), -1)], axis=1)


@dataclass
class _Logistic:
    weights: Floats
    bias: float

    def probability(self, x: Floats) -> Floats:
        return np.asarray(1 / (1 + np.exp(-(x @ self.weights + self.bias))), dtype=np.float64)


@dataclass
class ActModel:
    end: _Logistic
    end_threshold: float
    question: _Logistic

    def decide(self, x: Floats, rng: random.Random) -> list[Acts]:
        """One act pair per row: the end by threshold, the question drawn."""
        ends = self.end.probability(x) >= self.end_threshold
        asks = self.question.probability(x)
        return [Acts(bool(e), rng.random() < float(q)) for e, q in zip(ends, asks, strict=True)]

    def save(self, folder: Path) -> None:
        data = {
            "kind": "logistic_regressions",
            "features": "embed(last assistant turn) + scalars (services/simulator/acts.py)",
            "end": {"weights": self.end.weights.tolist(), "bias": self.end.bias},
            "end_threshold": self.end_threshold,
            "question": {"weights": self.question.weights.tolist(), "bias": self.question.bias},
        }
        (folder / FILE).write_text(json.dumps(data))

    @classmethod
    def load(cls, folder: Path) -> ActModel | None:
        """The calibration's act model (None for calibrations made before issue 24)."""
        path = folder / FILE
        if not path.is_file():
            return None
        data = json.loads(path.read_text())

        def part(raw: dict[str, object]) -> _Logistic:
            return _Logistic(np.asarray(raw["weights"], dtype=np.float64), float(str(raw["bias"])))

        return cls(part(data["end"]), float(data["end_threshold"]), part(data["question"]))


def _logistic(x: Floats, y: Sequence[bool], seed: int) -> _Logistic:
    from sklearn.linear_model import LogisticRegression

    labels = np.asarray(y, dtype=int)
    if labels.min() == labels.max():  # one class only: a constant probability
        return _Logistic(np.zeros(x.shape[1]), 30.0 if labels[0] else -30.0)
    model = LogisticRegression(C=1.0, max_iter=3000, random_state=seed)
    model.fit(x, labels)
    return _Logistic(np.asarray(model.coef_[0], dtype=np.float64), float(model.intercept_[0]))


def threshold_for_rate(scores: Floats, rate: float) -> float:
    """The threshold at or above which the share ``rate`` of ``scores`` lies (infinity when
    ``rate`` is 0: nothing passes)."""
    if rate <= 0 or len(scores) == 0:
        return math.inf
    ranked = np.sort(scores)[::-1]
    keep = max(1, round(rate * len(ranked)))
    return float(ranked[keep - 1])


def fit_acts(x: Floats, acts: Sequence[Acts], *, seed: int = 0) -> ActModel:
    """Fit both act models on real contexts ``x`` and the acts real users took there."""
    ends = [a.end for a in acts]
    end = _logistic(x, ends, seed)
    threshold = threshold_for_rate(end.probability(x), sum(ends) / len(ends))
    return ActModel(end, threshold, _logistic(x, [a.question for a in acts], seed))
