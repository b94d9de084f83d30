"""Small pieces both sides of the wire need: the end-of-turn tokens a decoded response ends
with, and a value mapped onto 0..1 by its range. The server (``services.protocols``) imports
them from here, so the reward files and the server agree by construction."""

from __future__ import annotations

import math
from collections.abc import Sequence

#: End-of-turn and padding tokens a decoded query may end with (OpenRLHF decodes with
#: ``skip_special_tokens=False``); the judge should not see them as part of the response.
END_MARKERS = (
    "<|im_end|>",
    "<|endoftext|>",
    "<|eot_id|>",
    "<|end_of_text|>",
    "<|end|>",
    "<end_of_turn>",
    "<eos>",
    "</s>",
    "<pad>",
)


def strip_end_markers(text: str) -> str:
    """``"Hello<|im_end|><|endoftext|>\\n"`` -> ``"Hello"``; leading text is left alone."""
    while True:
        trimmed = text.rstrip()
        for marker in END_MARKERS:
            if trimmed.endswith(marker):
                trimmed = trimmed[: -len(marker)]
                break
        if trimmed == text:
            return text
        text = trimmed


def unit_interval(value: float, bounds: Sequence[float] | None) -> float:
    """``value`` on [0, 1] by its range ``(low, high)`` (clamped); a logistic when unbounded.

    >>> unit_interval(3.0, (1.0, 5.0))
    0.5
    """
    if bounds is None:
        return 1.0 / (1.0 + math.exp(-value))
    low, high = bounds
    return min(1.0, max(0.0, (value - low) / (high - low)))
