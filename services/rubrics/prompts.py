"""The judge prompts of rubric scoring: which template each mode uses, and how it is filled.

Templates live in ``judges/templates`` (``rubric_criterion``, ``rubric_generate``,
``rubric_implicit`` and their ``_reference`` variants, which show the judge the rubric's
reference answer). The defaults are the ``@2`` versions, whose fences carry a secret boundary
code that a completion cannot forge (:mod:`judges.fencing`, ``PLAUDIT_JUDGE_FENCE_SECRET``);
``@1`` (plain tags) stays selectable with ``template``. A request may name another template
of the same shape.
"""

from __future__ import annotations

from collections.abc import Sequence

from judges.templates import PromptTemplate, RenderedPrompt, TemplateError, TemplateNotFoundError
from judges.templates import load_template as _load_template
from plaudit_wire.rubrics import Criterion, RubricMode
from services.core.errors import InvalidInput

BASE_TEMPLATES: dict[RubricMode, str] = {
    "logprob": "rubric_criterion",
    "generate": "rubric_generate",
    "implicit": "rubric_implicit",
}
#: The variables each mode fills (plus ``reference_answer`` when it is shown, ``k`` for grades).
VARIABLES: dict[RubricMode, frozenset[str]] = {
    "logprob": frozenset({"question", "response", "criterion"}),
    "generate": frozenset({"question", "rubric", "response"}),
    "implicit": frozenset({"question", "rubric", "response", "k"}),
}
YES = "yes"


def default_template(mode: RubricMode, show_reference: bool) -> str:
    """``rubric_criterion@2``, ``rubric_implicit_reference@2``, ... (pinned to the latest)."""
    name = BASE_TEMPLATES[mode] + ("_reference" if show_reference else "")
    return _load_template(name).ref


def load_template(ref: str | None, mode: RubricMode, show_reference: bool) -> PromptTemplate:
    """The template a request names (or the mode's default), checked to fit the mode."""
    try:
        template = _load_template(ref or default_template(mode, show_reference))
    except TemplateNotFoundError as exc:
        raise InvalidInput(str(exc), param="template") from None
    kind = "generate" if mode == "generate" else "choice"
    expected = VARIABLES[mode] | ({"reference_answer"} if show_reference else set())
    if template.kind != kind or template.variables != expected:
        raise InvalidInput(
            f"template {template.ref} does not fit mode {mode!r}"
            f"{' with show_reference' if show_reference else ''}: it needs a {kind} template "
            f"with the variables {sorted(expected)}",
            param="template",
        )
    if mode == "logprob" and not any(_is_yes(c) for c in _choices(template)):
        raise InvalidInput(f"template {template.ref} has no 'yes' candidate", param="template")
    return template


def rubric_listing(criteria: Sequence[Criterion]) -> str:
    """The rubric as the generate and implicit prompts show it, one criterion per line.

    >>> rubric_listing([Criterion(id="c1", text="Names X.", weight=3, kind="required",
    ...                           anchor=False)])
    'c1 (required, weight 3): Names X.'
    """
    return "\n".join(f"{c.id} ({c.kind}, weight {c.weight:g}): {c.text}" for c in criteria)


def render(
    template: PromptTemplate, code: str | None = None, **values: str | int
) -> RenderedPrompt:
    """Fill ``template``; ``code``: the boundary code of an ``@2`` template's fences (None: the
    process's own, see :mod:`judges.fencing`)."""
    try:
        return template.render(code, **values)
    except TemplateError as exc:  # pragma: no cover - load_template checked the variables
        raise InvalidInput(str(exc), param="template") from None


def p_yes(candidates: Sequence[str], probs: Sequence[float]) -> float:
    """The probability of a yes among the candidates (``Yes`` and ``yes`` together).

    >>> p_yes(["Yes", "yes", "No", "no"], [0.5, 0.1, 0.3, 0.1])
    0.6
    """
    return sum(p for c, p in zip(candidates, probs, strict=True) if _is_yes(c))


def _is_yes(candidate: str) -> bool:
    return candidate.strip().casefold() == YES


def _choices(template: PromptTemplate) -> tuple[str, ...]:
    return template.choices if isinstance(template.choices, tuple) else ()
