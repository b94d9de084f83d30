"""A scripted rubric judge over tests.judges.scripted_backend, for plumbing and aggregation tests.

Per criterion (the ``rubric_criterion`` prompts): P(yes) is 0.9 when the criterion's last
word appears in the response, else 0.1. Implicit grades: 8 for a response containing "GOOD",
3 otherwise. Generate mode replies with the same verdicts as JSON, or prose for a response
containing "PROSE". A response containing "FAIL" fails (error), "SLOW" times out, "TOOLONG"
is invalid (too long for the judge); every item fails when ``down``. Never the only proof
that a feature works: tests/services/rubrics/test_score_real.py runs the real SmolLM2.
"""

from __future__ import annotations

import json
import math
import re

from judges.backends.base import ChoiceRequest, GenerateRequest
from tests.judges.scripted_backend import ScriptedBackend, ScriptedFailure

_BLOCK = r"<{tag}>\n(.*?)\n</{tag}>"
# The @2 templates' fences carry the request's boundary code: <<tag CODE>> ... <</tag CODE>>.
_CODE = re.compile(r"<<question ([0-9a-f]{16})>>\n")
_FENCED = r"<<{tag} {code}>>\n(.*?)\n<</{tag} {code}>>"
LAST_LINE = "\nCriterion: "
P_MET = 0.9


def block(text: str, tag: str) -> str:
    """A fence's content, read as a parser that knows the fences would read it."""
    code = _CODE.search(text)
    if code and tag == "criterion":  # @2: the criterion is the last line, unfenced
        return text.rsplit(LAST_LINE, 1)[-1] if LAST_LINE in text else ""
    pattern = _FENCED.format(tag=tag, code=code.group(1)) if code else _BLOCK.format(tag=tag)
    match = re.search(pattern, text, re.S)
    return match.group(1) if match else ""


def met(criterion: str, response: str) -> bool:
    """The scripted verdict: the criterion's last word appears in the response."""
    words = re.findall(r"[a-z0-9]+", criterion.lower())
    return bool(words) and words[-1] in response.lower()


class RubricScriptedBackend(ScriptedBackend):
    def __init__(self) -> None:
        super().__init__(choose=self._choose, reply=self._reply, model_id="scripted-rubric-judge")
        self.down = False

    def _text(self, messages: object) -> str:
        return "\n".join(m["content"] for m in messages)  # type: ignore[attr-defined]

    def _check(self, response: str) -> None:
        if self.down:
            raise ScriptedFailure("error", "backend is down")
        for word, status in (("FAIL", "error"), ("SLOW", "timeout"), ("TOOLONG", "invalid")):
            if word in response:
                raise ScriptedFailure(status, f"scripted {status}")  # type: ignore[arg-type]

    def _choose(self, request: ChoiceRequest) -> list[float]:
        text = self._text(request.messages)
        response = block(text, "response")
        self._check(response)
        if "Yes" in request.candidates:
            p = P_MET if met(block(text, "criterion"), response) else 1 - P_MET
            weights = {"Yes": p, "yes": 0.0, "No": 1 - p, "no": 0.0}
            return [
                math.log(weights[c]) if weights[c] > 0 else -math.inf for c in request.candidates
            ]
        level = 8 if "GOOD" in response else 3
        return [0.0 if i + 1 == level else -4.0 for i in range(len(request.candidates))]

    def _reply(self, request: GenerateRequest) -> str:
        text = self._text(request.messages)
        response = block(text, "response")
        self._check(response)
        if "PROSE" in response:
            return "The response looks fine to me."
        verdicts = []
        for line in block(text, "rubric").splitlines():
            cid, _, criterion = line.partition(" (")
            statement = criterion.partition("): ")[2]
            verdicts.append({"id": cid, "met": met(statement, response), "reason": "scripted"})
        if "PARTIAL" in response:
            verdicts = verdicts[:-1]
        return json.dumps({"verdicts": verdicts})
