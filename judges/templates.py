"""Versioned judge prompt templates shipped with the package, loaded as ``name@version``.

Each template is a TOML file ``judges/templates/<name>@<version>.toml`` with a system and
a user message using ``$variable`` placeholders (:class:`string.Template`). A published
version is never edited: a change is a new version, so a training run that names
``pairwise@1`` keeps getting the same prompt.

Completions and prompts are data, not instructions: the template puts each one inside a
tag block (``<response_a> ... </response_a>``) and tells the judge to ignore instructions
inside the blocks. When rendering, any fence tag that appears inside a value is defused
(``</response_a>`` becomes ``[/response_a]``), so a completion cannot close its block
and speak to the judge directly.

Templates with ``boundary = true`` (version 2 of the pairwise and scale templates) go further
(issue 9, :mod:`judges.fencing`): their fences carry a secret boundary code
(``<<response_a $boundary>>``), every value is neutralised (fence-like tags, chat role headers,
the code), and the values named in ``untrusted`` (the responses) have their fake verdict and
role lines flagged.

Example::

    template = load_template("pairwise@1")
    prompt = template.render(question="2+2?", response_a="4", response_b="5")
    request = prompt.choice_request()  # candidates ("A", "B")
"""

from __future__ import annotations

import functools
import importlib.resources
import re
import string
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from judges.backends.base import ChatMessage, ChoiceRequest, GenerateRequest
from judges.fencing import boundary_code, neutralise, process_secret, slot_labels

TemplateKind = Literal["choice", "generate"]
BOUNDARY: Final = "boundary"
"""The placeholder a ``boundary = true`` template's fences carry; filled by :meth:`render`."""
LABELS: Final = ("label_a", "label_b")
"""The placeholders of a ``labels = true`` template's slot letters (its candidates)."""
GRADES: Final = "grades"
"""``choices = "grades"`` in a template file: the candidates are ``"1"`` .. ``str(k)``."""
MIN_GRADES, MAX_GRADES = 2, 100

_REF = re.compile(r"^(?P<name>[a-z][a-z0-9_]*)(?:@(?P<version>[1-9][0-9]*))?$")
_FILE = re.compile(r"^(?P<name>[a-z][a-z0-9_]*)@(?P<version>[1-9][0-9]*)\.toml$")


class TemplateNotFoundError(KeyError):
    """No template has this name (or this version). The service answers it with a 422."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else "template not found"


class TemplateError(ValueError):
    """A template cannot be rendered with the given values, or its file is malformed."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RenderedPrompt(ChoiceRequest):
    """A rendered template: a backend request (chat messages, the candidates to score) plus
    what the judge needs to read its answer. It is its own :class:`ChoiceRequest`, so scoring
    a prompt sends it as it is (issue 20: one form, not a copy)."""

    template: str
    parser: str = ""
    verdict_prefix: str = ""
    fence_code: str = ""

    def choice_request(self) -> ChoiceRequest:
        """This prompt as the backend request that scores its candidates."""
        if not self.candidates:
            raise TemplateError(f"template {self.template} has no candidates to score")
        return self

    def verdict_request(self, reply: str) -> ChoiceRequest:
        """Score the candidates as the verdict that follows a generated ``reply``.

        For a reply with no parseable verdict (small judges ramble or stop early): the
        assistant turn is forced to ``reply`` + the template's ``verdict_prefix``, and the
        candidates are scored at that point, so the judge's own reasoning still decides.
        """
        if not self.candidates or not self.verdict_prefix:
            raise TemplateError(f"template {self.template} has no verdict to score")
        return ChoiceRequest(
            messages=list(self.messages),
            candidates=list(self.candidates),
            assistant_prefix=self.assistant_prefix + reply.rstrip() + self.verdict_prefix,
        )

    def generate_request(
        self, max_new_tokens: int = 256, temperature: float = 0.0, seed: int | None = None
    ) -> GenerateRequest:
        """A backend request that generates a reply to this prompt."""
        return GenerateRequest(
            messages=list(self.messages),
            max_new_tokens=max_new_tokens,
            temperature=temperature,
            seed=seed,
        )


@dataclass(frozen=True, slots=True)
class PromptTemplate:
    """One version of a judge prompt. Build it with :func:`load_template`."""

    name: str
    version: int
    kind: TemplateKind
    description: str
    system: str
    user: str
    parser: str
    choices: tuple[str, ...] | Literal["grades"]
    fences: tuple[str, ...]
    assistant_prefix: str = ""
    verdict_prefix: str = ""
    defaults: Mapping[str, str] = field(default_factory=dict)
    boundary: bool = False
    untrusted: tuple[str, ...] = ()
    labels: bool = False

    @property
    def ref(self) -> str:
        """``name@version``."""
        return f"{self.name}@{self.version}"

    @property
    def variables(self) -> frozenset[str]:
        """Placeholders the template uses (``k`` included for graded templates)."""
        return _variables(
            self.system, self.user, self.choices == GRADES, self.boundary, self.labels
        )

    def render(self, fence_code: str | None = None, /, **values: Any) -> RenderedPrompt:
        """Fill the placeholders; every variable without a default is required.

        Graded templates take ``k`` (an int from 2 to 100), which also sets the candidates.
        A ``boundary`` template uses ``fence_code`` (positional) in its fences (default: the
        code of this template and question under this process's secret, see
        :mod:`judges.fencing`); a ``labels`` template names its two slots, and its candidates,
        with two letters the code chooses.
        Raises :class:`TemplateError` for a missing, unknown or ill-typed value.
        """
        return self._render(fence_code, values, {})

    def render_many(
        self, fence_code: str | None, rows: Sequence[Mapping[str, Any]], **shared: Any
    ) -> list[RenderedPrompt]:
        """:meth:`render` for each row of values (plus ``shared``), neutralising each distinct
        value once: a G=8 round robin in both orders is 56 prompts over 9 texts (issue 19).

        >>> t = load_template("pairwise@1")
        >>> [p.candidates for p in t.render_many(None, [{"response_a": "4", "response_b": "5"}],
        ...                                       question="2+2?")]
        [('A', 'B')]
        """
        memo: dict[tuple[str, str], str] = {}
        if not rows:
            return []
        keys = rows[0].keys()
        candidates, code, first = self._values(fence_code, {**shared, **rows[0]}, memo)
        out = [self._prompt(candidates, code, first)]
        if not self._rows_only_fill(keys, fence_code):
            out += [self._render(fence_code, {**shared, **row}, memo) for row in rows[1:]]
            return out
        # Every row fills the same slots (a tournament's two responses): what the shared
        # values make (their fencing, the code, the letters) is reused, and only each row's
        # own values are fenced (issue 19).
        for row in rows[1:]:
            # Another key set, or a value that is not text (converted, or refused with the
            # error render() gives): rendered whole.
            if row.keys() != keys or not all(type(value) is str for value in row.values()):
                out.append(self._render(fence_code, {**shared, **row}, memo))
                continue
            if self.boundary:
                own = self._fenced(row, code, memo)
            else:
                own = {key: self._defuse(text) for key, text in row.items()}
            out.append(self._prompt(candidates, code, {**first, **own}))
        return out

    def _rows_only_fill(self, keys: Any, fence_code: str | None) -> bool:
        """Whether rows with these keys change nothing but their own slots' text: not the
        grades (``k``), and not the boundary code (made from the question when no code is
        given)."""
        if "k" in keys:
            return False
        return not (self.boundary and not fence_code and "question" in keys)

    def _render(
        self, fence_code: str | None, values: Mapping[str, Any], memo: dict[tuple[str, str], str]
    ) -> RenderedPrompt:
        return self._prompt(*self._values(fence_code, values, memo))

    def _values(
        self, fence_code: str | None, values: Mapping[str, Any], memo: dict[tuple[str, str], str]
    ) -> tuple[tuple[str, ...], str, dict[str, str]]:
        """The candidates, the boundary code ("" without one) and every placeholder's text,
        each value checked and neutralised."""
        merged = {**self.defaults, **values}
        variables = self.variables
        if merged.keys() != variables:
            missing = sorted(variables - merged.keys())
            unknown = sorted(merged.keys() - variables)
            raise TemplateError(
                f"{self.ref}: missing variables {missing}, unknown variables {unknown}"
            )
        candidates = self._candidates(merged)
        texts = {
            key: value if type(value) is str else _as_text(key, value)
            for key, value in merged.items()
        }
        code = ""
        if self.boundary:
            code = fence_code or boundary_code(
                process_secret(), self.ref, texts.get("question", "")
            )
            text_values = self._fenced(texts, code, memo)
            text_values[BOUNDARY] = code
            if self.labels:
                candidates = slot_labels(code)
                text_values.update(zip(LABELS, candidates, strict=True))
        else:
            text_values = {key: self._defuse(text) for key, text in texts.items()}
        return candidates, code, text_values

    def _prompt(
        self, candidates: tuple[str, ...], code: str, text_values: Mapping[str, str]
    ) -> RenderedPrompt:
        return RenderedPrompt(
            self._messages(text_values),
            candidates,
            self.assistant_prefix,
            template=self.ref,
            parser=self.parser,
            verdict_prefix=self.verdict_prefix,
            fence_code=code,
        )

    def _fenced(
        self, texts: Mapping[str, str], code: str, memo: dict[tuple[str, str], str]
    ) -> dict[str, str]:
        """Each text neutralised for its slot (once per distinct text, code and trust)."""
        trusted, untrusted = "t:" + code, "u:" + code
        fenced: dict[str, str] = {}
        for key, text in texts.items():
            distrust = key in self.untrusted
            slot = (untrusted if distrust else trusted, text)
            done = memo.get(slot)
            if done is None:
                done = memo[slot] = neutralise(text, self.fences, code, untrusted=distrust)
            fenced[key] = done
        return fenced

    def _messages(self, text_values: Mapping[str, str]) -> tuple[ChatMessage, ...]:
        messages: list[ChatMessage] = []
        if self.system:
            messages.append(
                {"role": "system", "content": _compiled(self.system).substitute(text_values)}
            )
        messages.append({"role": "user", "content": _compiled(self.user).substitute(text_values)})
        return tuple(messages)

    def _candidates(self, values: Mapping[str, Any]) -> tuple[str, ...]:
        if isinstance(self.choices, tuple):
            return self.choices
        k = values["k"]
        if isinstance(k, bool) or not isinstance(k, int) or not MIN_GRADES <= k <= MAX_GRADES:
            raise TemplateError(
                f"{self.ref}: k must be an integer from {MIN_GRADES} to {MAX_GRADES}"
            )
        return tuple(str(grade) for grade in range(1, k + 1))

    def _defuse(self, text: str) -> str:
        if not self.fences:
            return text
        tags = "|".join(re.escape(tag) for tag in self.fences)
        return re.sub(rf"<\s*(/?)\s*({tags})\s*>", r"[\1\2]", text, flags=re.IGNORECASE)


def load_template(ref: str) -> PromptTemplate:
    """Load ``name@version``, or the latest version for a bare ``name``.

    Raises :class:`TemplateNotFoundError` (a ``KeyError``) for an unknown name or version.
    """
    match = _REF.match(ref.strip()) if isinstance(ref, str) else None
    if match is None:
        raise TemplateNotFoundError(
            f"malformed template reference {ref!r}; expected 'name@version'"
        )
    catalog = _catalog()
    name = match["name"]
    versions = catalog.get(name)
    if not versions:
        raise TemplateNotFoundError(
            f"unknown template {name!r}; available: {', '.join(available_templates())}"
        )
    version = int(match["version"]) if match["version"] else max(versions)
    if version not in versions:
        known = ", ".join(f"{name}@{v}" for v in sorted(versions))
        raise TemplateNotFoundError(f"unknown version {name}@{version}; available: {known}")
    return versions[version]


def available_templates() -> list[str]:
    """Every shipped ``name@version``, sorted."""
    return sorted(
        f"{name}@{version}" for name, versions in _catalog().items() for version in versions
    )


@functools.cache
def _catalog() -> dict[str, dict[int, PromptTemplate]]:
    catalog: dict[str, dict[int, PromptTemplate]] = {}
    for entry in importlib.resources.files("judges").joinpath("templates").iterdir():
        match = _FILE.match(entry.name)
        if match is None:
            continue
        template = parse_template(
            tomllib.loads(entry.read_text(encoding="utf-8")), source=entry.name
        )
        if (template.name, template.version) != (match["name"], int(match["version"])):
            raise TemplateError(f"{entry.name}: name/version inside differ from the file name")
        catalog.setdefault(template.name, {})[template.version] = template
    return catalog


def parse_template(data: Mapping[str, Any], source: str = "<template>") -> PromptTemplate:
    """Build a :class:`PromptTemplate` from a parsed TOML table, checking its fences."""
    try:
        choices = data["choices"]
        if isinstance(choices, str) and choices != GRADES:
            raise ValueError(f"choices must be a list or {GRADES!r}")
        template = PromptTemplate(
            name=str(data["name"]),
            version=int(data["version"]),
            kind=data["kind"],
            description=str(data["description"]),
            system=str(data.get("system", "")),
            user=str(data["user"]),
            parser=str(data.get("parser", "")),
            choices=GRADES if choices == GRADES else tuple(str(c) for c in list(choices)),
            fences=tuple(str(f) for f in data.get("fences", ())),
            assistant_prefix=str(data.get("assistant_prefix", "")),
            verdict_prefix=str(data.get("verdict_prefix", "")),
            defaults={str(k): str(v) for k, v in data.get("defaults", {}).items()},
            boundary=bool(data.get("boundary", False)),
            untrusted=tuple(str(u) for u in data.get("untrusted", ())),
            labels=bool(data.get("labels", False)),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise TemplateError(f"{source}: malformed template ({exc})") from exc
    if template.kind not in ("choice", "generate"):
        raise TemplateError(f"{source}: kind must be 'choice' or 'generate'")
    for tag in template.fences:
        opening, closing = _fence_tags(tag, template.boundary)
        if opening not in template.user or closing not in template.user:
            raise TemplateError(
                f"{source}: fence {opening} ... {closing} missing from the user message"
            )
    if template.labels and not (template.boundary and len(template.choices) == 2):
        raise TemplateError(f"{source}: labels need boundary = true and two choices")
    if not set(template.untrusted) <= set(template.fences):
        raise TemplateError(f"{source}: untrusted values must be fenced")
    return template


def _fence_tags(tag: str, boundary: bool) -> tuple[str, str]:
    if boundary:
        return f"<<{tag} ${BOUNDARY}>>", f"<</{tag} ${BOUNDARY}>>"
    return f"<{tag}>", f"</{tag}>"


@functools.lru_cache(maxsize=256)
def _variables(
    system: str, user: str, graded: bool, boundary: bool, labels: bool
) -> frozenset[str]:
    """A template's placeholders, found once (every render checks its values against them)."""
    names = set(_compiled(system).get_identifiers()) | set(_compiled(user).get_identifiers())
    if graded:
        names.add("k")
    if boundary:
        names.discard(BOUNDARY)
    if labels:
        names -= set(LABELS)
    return frozenset(names)


@dataclass(frozen=True)
class _Compiled:
    """A ``$placeholder`` text parsed once into its placeholder names and a ``%`` format.

    Filling it is one ``%`` format: :meth:`string.Template.substitute`
    scans the whole text with a regular expression on every call, 7% of a G=8 group's CPU in
    the overhead bench (56 prompts of about 1.2 KB, issue 19). Same syntax and result:
    ``$name``, ``${name}``, ``$$`` for a dollar sign.
    """

    names: tuple[str, ...]
    # The text as a printf-style format ("%(name)s" per placeholder, "%" doubled), which
    # fills every placeholder in one C-level call.
    printf: str

    @classmethod
    def parse(cls, text: str) -> _Compiled:
        literals: list[str] = []
        names: list[str] = []
        run: list[str] = []
        at = 0
        for match in string.Template.pattern.finditer(text):
            run.append(text[at : match.start()])
            at = match.end()
            if match["escaped"] is not None:
                run.append(string.Template.delimiter)
            elif match["invalid"] is not None:
                raise ValueError(f"invalid placeholder at character {match.start()}: {text!r}")
            else:
                literals.append("".join(run))
                names.append(match["named"] or match["braced"])
                run = []
        run.append(text[at:])
        literals.append("".join(run))
        escaped = [literal.replace("%", "%%") for literal in literals]
        printf = escaped[0] + "".join(
            f"%({name})s{literal}" for name, literal in zip(names, escaped[1:], strict=True)
        )
        return cls(tuple(names), printf)

    def substitute(self, values: Mapping[str, str]) -> str:
        """The text with each placeholder's value (``KeyError`` for a missing one)."""
        return self.printf % values

    def get_identifiers(self) -> list[str]:
        """The placeholder names, each once, in order of first use."""
        return list(dict.fromkeys(self.names))


@functools.lru_cache(maxsize=256)
def _compiled(text: str) -> _Compiled:
    """A template string, parsed once (templates are few and never change)."""
    return _Compiled.parse(text)


def _as_text(key: str, value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise TemplateError(f"variable {key!r} must be a string, not {type(value).__name__}")
