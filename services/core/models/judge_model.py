"""The judge's model as every service that asks it sees it: the cached backend and the
boundary codes of its fenced prompts (issue 20: rubrics, synthesis and the memory take this
port from the model layer instead of reaching into the judge service).

Example::

    model = JudgeModel(CachedJudge(backend, cache), fence_secret=b"...")
    code = model.fence_code(load_template("rubric_item@1"), "What is 2+2?")
    results = await model.cached.score_choices(requests)
"""

from __future__ import annotations

from dataclasses import dataclass

from judges.fencing import boundary_code
from judges.templates import PromptTemplate
from services.core.models.cached_judge import CachedJudge


@dataclass(frozen=True)
class JudgeModel:
    """One judge model in the process (one cache), shared by the services that ask it."""

    cached: CachedJudge
    fence_secret: bytes

    def fence_code(self, template: PromptTemplate, question: str) -> str | None:
        """The boundary code of a request's prompts (None: the template has no boundary).
        One per template and question, so the prompts of one request share their head."""
        if not template.boundary:
            return None
        return boundary_code(self.fence_secret, template.ref, question)
