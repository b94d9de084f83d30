"""The satisfaction predictor of a calibration: class-weighted multinomial logistic regression
on the assistant's turn and the user's answer to it (USS ratings, Sun et al. 2021, rate the
system turn just before each user turn, and the user's answer is the best evidence of how it
landed). Saved as plain JSON (weights, bias, classes, feature set), never pickled.

Two feature sets: ``embeddings`` (the sentence embeddings of both turns, the first
calibrations) and ``cues`` (issue 24, the default): the embeddings, their elementwise product
(agreement of the answer with the turn) and a few surface cues of dissatisfaction and
satisfaction (repair and negation words, apologies and "not available" answers, thanks,
lengths, questions). Most turns are rated 3, so an unweighted fit learns to answer 3; the
classes are weighted by their inverse frequency (``class_weight="balanced"``) so the rare low
ratings are predicted at all, and the report gives macro-F1 beside accuracy.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
import numpy.typing as npt

from services.simulator.data import UserTurnExample

Floats = npt.NDArray[np.float64]
Vectors = npt.NDArray[np.float32]
FeatureSet = Literal["embeddings", "cues"]
LEVELS = (1, 2, 3, 4, 5)
FILE = "predictor.json"

_REPAIR = re.compile(
    r"\b(no|not|never|wrong|actually|instead|didn'?t|don'?t|doesn'?t|can'?t|isn'?t|wasn'?t|"
    r"again|already|still|i said|i asked|what\?|huh|mean)\b",
    re.IGNORECASE,
)
_THANKS = re.compile(r"\b(thanks?|thank you|great|perfect|awesome|good|wonderful|nice)\b", re.I)
_SORRY = re.compile(
    r"\b(sorry|unfortunately|unable|cannot|can'?t|no (?:results|matches|availability)|"
    r"not available|couldn'?t|failed|don'?t have)\b",
    re.IGNORECASE,
)


def cues(assistant: str, reply: str) -> list[float]:
    """Surface cues of one rated exchange (small fixed vocabulary; order is the model's)."""
    a_words, r_words = assistant.split(), reply.split()
    return [
        float(len(_REPAIR.findall(reply))),
        float(bool(_THANKS.search(reply))),
        float(bool(_SORRY.search(assistant))),
        float("?" in reply),
        float("?" in assistant),
        math.log1p(len(r_words)),
        math.log1p(len(a_words)),
        _overlap(a_words, r_words),
    ]


def _overlap(a: Sequence[str], b: Sequence[str]) -> float:
    """Share of the answer's words that the assistant's turn used (a user repeating a slot)."""
    seen = {w.lower().strip(".,!?") for w in a}
    return sum(w.lower().strip(".,!?") in seen for w in b) / len(b) if b else 0.0


def features(
    assistant: Vectors,
    reply: Vectors,
    texts: tuple[Sequence[str], Sequence[str]] | None = None,
    feature_set: FeatureSet = "cues",
) -> Floats:
    """One row per rated exchange. ``embeddings``: [embed(assistant), embed(reply)];
    ``cues``: those, their product and :func:`cues` of ``texts`` (assistant, reply)."""
    parts = [assistant, reply]
    if feature_set == "cues":
        if texts is None:
            raise ValueError("the cues feature set needs the texts")
        rows = [cues(a, r) for a, r in zip(*texts, strict=True)]
        parts += [assistant * reply, np.asarray(rows, dtype=np.float32).reshape(len(rows), -1)]
    return np.concatenate(parts, axis=1).astype(np.float64)


def pair_texts(items: Sequence[UserTurnExample]) -> tuple[list[str], list[str]]:
    return [item.last_system or "" for item in items], [item.text for item in items]


@dataclass
class SatisfactionPredictor:
    weights: Floats  # (classes, features)
    bias: Floats  # (classes,)
    classes: tuple[int, ...]
    feature_set: FeatureSet = field(default="embeddings")

    def distribution(self, x: Floats) -> Floats:
        """P(level) for levels 1..5, one row per input (levels never seen: 0)."""
        logits = x @ self.weights.T + self.bias
        logits -= logits.max(axis=1, keepdims=True)
        probs = np.exp(logits)
        probs /= probs.sum(axis=1, keepdims=True)
        out = np.zeros((x.shape[0], len(LEVELS)))
        for column, level in enumerate(self.classes):
            out[:, LEVELS.index(level)] = probs[:, column]
        return out

    def features(
        self, assistant: Vectors, reply: Vectors, texts: tuple[Sequence[str], Sequence[str]]
    ) -> Floats:
        """The rows this predictor was fitted on (its own feature set)."""
        return features(assistant, reply, texts, self.feature_set)

    def save(self, folder: Path) -> None:
        data = {
            "kind": "multinomial_logistic_regression",
            "feature_set": self.feature_set,
            "classes": list(self.classes),
            "weights": self.weights.tolist(),
            "bias": self.bias.tolist(),
        }
        (folder / FILE).write_text(json.dumps(data))

    @classmethod
    def load(cls, folder: Path) -> SatisfactionPredictor:
        data = json.loads((folder / FILE).read_text())
        feature_set = data.get("feature_set", "embeddings")  # calibrations before issue 24
        if feature_set not in ("embeddings", "cues"):
            raise ValueError(f"unknown satisfaction feature set {feature_set!r}")
        return cls(
            weights=np.asarray(data["weights"], dtype=np.float64),
            bias=np.asarray(data["bias"], dtype=np.float64),
            classes=tuple(int(c) for c in data["classes"]),
            feature_set=feature_set,
        )


def fit(
    x: Floats,
    y: Sequence[int],
    *,
    c: float = 1.0,
    seed: int = 0,
    balance: float = 1.0,
    feature_set: FeatureSet = "embeddings",
) -> SatisfactionPredictor:
    """Fit on rated turns (at least two distinct levels). Each level is weighted by its
    inverse frequency to the power ``balance`` (0: unweighted, 1: sklearn's "balanced")."""
    from sklearn.linear_model import LogisticRegression

    labels = np.asarray(y)
    if len(set(labels.tolist())) < 2:
        raise ValueError("the satisfaction predictor needs turns rated at two levels or more")
    model = LogisticRegression(
        C=c, max_iter=3000, random_state=seed, class_weight=class_weights(labels, balance)
    )
    model.fit(x, labels)
    weights, bias = np.asarray(model.coef_), np.asarray(model.intercept_)
    classes = tuple(int(c) for c in model.classes_)
    if len(classes) == 2:  # sklearn keeps one row for two classes: make it a softmax
        weights = np.vstack([-weights[0] / 2, weights[0] / 2])
        bias = np.asarray([-bias[0] / 2, bias[0] / 2])
    return SatisfactionPredictor(weights, bias, classes, feature_set)


def class_weights(labels: npt.NDArray[np.int_], balance: float) -> dict[int, float]:
    """``(n / (levels * n_level)) ** balance`` per level (sklearn's "balanced" at 1)."""
    levels, counts = np.unique(labels, return_counts=True)
    return {
        int(level): float((len(labels) / (len(levels) * count)) ** balance)
        for level, count in zip(levels, counts, strict=True)
    }


def expected(distribution: Sequence[float]) -> float:
    return float(sum(level * p for level, p in zip(LEVELS, distribution, strict=True)))
