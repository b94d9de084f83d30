"""The satisfaction predictor of a calibration: multinomial logistic regression on sentence
embeddings of the assistant's turn and the user's answer to it (USS ratings, Sun et al. 2021,
rate the system turn just before each user turn, and the user's answer is the best evidence of
how it landed). Saved as plain JSON (weights, bias, classes), never pickled.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from services.simulator.data import UserTurnExample

Floats = npt.NDArray[np.float64]
LEVELS = (1, 2, 3, 4, 5)
FILE = "predictor.json"


def features(assistant: npt.NDArray[np.float32], reply: npt.NDArray[np.float32]) -> Floats:
    """One row per turn: [embedding of the assistant's turn, embedding of the user's answer]."""
    return np.concatenate([assistant, reply], axis=1).astype(np.float64)


def pair_texts(items: Sequence[UserTurnExample]) -> tuple[list[str], list[str]]:
    return [item.last_system or "" for item in items], [item.text for item in items]


@dataclass
class SatisfactionPredictor:
    weights: Floats  # (classes, features)
    bias: Floats  # (classes,)
    classes: tuple[int, ...]

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

    def save(self, folder: Path) -> None:
        data = {
            "kind": "multinomial_logistic_regression",
            "features": "concat(embed(assistant turn), embed(user answer))",
            "classes": list(self.classes),
            "weights": self.weights.tolist(),
            "bias": self.bias.tolist(),
        }
        (folder / FILE).write_text(json.dumps(data))

    @classmethod
    def load(cls, folder: Path) -> SatisfactionPredictor:
        data = json.loads((folder / FILE).read_text())
        return cls(
            weights=np.asarray(data["weights"], dtype=np.float64),
            bias=np.asarray(data["bias"], dtype=np.float64),
            classes=tuple(int(c) for c in data["classes"]),
        )


def fit(x: Floats, y: Sequence[int], *, c: float = 1.0, seed: int = 0) -> SatisfactionPredictor:
    """Fit on rated turns (at least two distinct levels)."""
    from sklearn.linear_model import LogisticRegression

    labels = np.asarray(y)
    if len(set(labels.tolist())) < 2:
        raise ValueError("the satisfaction predictor needs turns rated at two levels or more")
    model = LogisticRegression(C=c, max_iter=2000, random_state=seed)
    model.fit(x, labels)
    weights, bias = np.asarray(model.coef_), np.asarray(model.intercept_)
    classes = tuple(int(c) for c in model.classes_)
    if len(classes) == 2:  # sklearn keeps one row for two classes: make it a softmax
        weights = np.vstack([-weights[0] / 2, weights[0] / 2])
        bias = np.asarray([-bias[0] / 2, bias[0] / 2])
    return SatisfactionPredictor(weights, bias, classes)


def expected(distribution: Sequence[float]) -> float:
    return float(sum(level * p for level, p in zip(LEVELS, distribution, strict=True)))
