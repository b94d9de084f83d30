"""The ``plaudit`` command with the scripted synthesis generator and rubric judge as every
model role's backend: ``python -m tests.services.core.jobs.scripted_plaudit worker`` (or
``serve all``).

The checkpoint tests (tests/services/core/jobs/test_checkpoints.py) SIGKILL such a process in
the middle of a synthesis or evaluation job: the job machinery, the database, Redis and the
process are real; only the model's answers are scripted, so a job is fast and its output known.
Each model call sleeps ``PLAUDIT_TEST_MODEL_DELAY_S``, so the kill lands mid-job, and each
document drafted for synthesis is logged to ``PLAUDIT_TEST_CALL_LOG`` (one line per document:
its first 60 characters), so a test can tell what each attempt generated.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Any

from judges.backends.base import GenerateRequest, GenerateResult
from tests.services.rubrics.synth_scripted import SynthScriptedBackend

_DOCUMENT = re.compile(r"<document>\n(.*?)\n</document>", re.S)


def document_key(text: str) -> str:
    """How the call log names a document: its first 60 characters, on one line."""
    return " ".join(text.split())[:60]


class LoggingSynthBackend(SynthScriptedBackend):
    """:class:`SynthScriptedBackend` that logs each synthesis document it drafts."""

    def __init__(self, log_path: str | None, delay: float) -> None:
        super().__init__()
        self._log_path = log_path
        self.delay = delay

    async def generate(self, requests: Sequence[GenerateRequest]) -> list[GenerateResult]:
        results = await super().generate(requests)
        if self._log_path:  # after the delay: a document is logged once it was drafted
            drafted = [_DOCUMENT.search(r.messages[-1]["content"]) for r in requests]
            lines = [document_key(m.group(1)) + "\n" for m in drafted if m]
            with open(self._log_path, "a") as out:
                out.writelines(lines)
        return results


def main() -> None:
    backend = LoggingSynthBackend(
        os.environ.get("PLAUDIT_TEST_CALL_LOG"),
        float(os.environ.get("PLAUDIT_TEST_MODEL_DELAY_S", "0")),
    )
    import services.core.models.layer as model_layer

    def scripted(*args: Any, **kwargs: Any) -> LoggingSynthBackend:
        return backend

    # Before any service module binds the name (they import it from the module).
    model_layer.model_backend = scripted
    from services.cli.main import main as plaudit

    plaudit()


if __name__ == "__main__":
    main()
