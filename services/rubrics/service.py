"""The rubrics service: versioned rubrics (create, edit, diff, rollback, import) and scoring.

Every write is checked (:mod:`services.rubrics.validation`) before it is stored, and every
inline rubric before it is judged. Example::

    service = RubricsService(RubricsSettings(), ArtifactRubricRepository(store), judge)
    rubric = await service.create(RubricCreate(name="boil", criteria=[...]))   # rb_..., v1
    scored = await service.score(ScoreRequest(rubric_id=rubric.id, prompt="...",
                                              completions=["..."]))
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from plaudit_wire.rubrics import (
    ImportResult,
    InlineRubric,
    RubricContent,
    RubricCreate,
    RubricDiff,
    RubricFields,
    RubricOut,
    RubricRef,
    RubricUpdate,
    RubricVersionInfo,
    ScoreOptions,
    ScoreRequest,
    ScoreResponse,
)
from plaudit_wire.schemas import INT32_MAX, CompletionItem, Page, Prompt
from plaudit_wire.unicode_check import find_surrogates
from services.core.db.records import ScoredGroupRepository, content_hash
from services.core.db.tables import utc_iso
from services.core.errors import Conflict, InvalidInput, NotFound
from services.core.web.envelope import format_loc
from services.judge.service import prompt_text
from services.rubrics.adaptive import AdaptiveSink
from services.rubrics.diff import diff_versions
from services.rubrics.judging import RubricJudge
from services.rubrics.repository import (
    ListFilter,
    NewRubric,
    RubricHead,
    RubricRepository,
    RubricVersion,
)
from services.rubrics.scoring import score_completions
from services.rubrics.settings import RubricsSettings
from services.rubrics.validation import assign_ids, check_name, check_rubric

log = logging.getLogger(__name__)

SERVICE = "rubrics"


class RubricsService:
    """Rubrics kept in a :class:`RubricRepository`, scored by a :class:`RubricJudge`."""

    def __init__(
        self,
        settings: RubricsSettings,
        repository: RubricRepository,
        judge: RubricJudge,
        scored_groups: ScoredGroupRepository | None = None,
    ) -> None:
        self._settings = settings
        self._repository = repository
        self._judge = judge
        self._scored_groups = scored_groups
        self._adaptive_sink: AdaptiveSink | None = None

    @property
    def settings(self) -> RubricsSettings:
        return self._settings

    @property
    def adaptive_sink(self) -> AdaptiveSink | None:
        """Where adaptive channels send scored groups (None: no memory in this process)."""
        return self._adaptive_sink

    def send_adaptive_groups_to(self, sink: AdaptiveSink) -> None:
        """The port the evaluation memory connects through: adaptive channels offer their
        scored groups to ``sink`` and read its pass rates. One sink per process."""
        if self._adaptive_sink is not None and self._adaptive_sink is not sink:
            raise RuntimeError("the rubric service already sends adaptive groups to a memory")
        self._adaptive_sink = sink

    # --- writes ---------------------------------------------------------------------------

    async def create(self, body: RubricCreate) -> RubricOut:
        """Version 1 of a new rubric; criteria without an id get c1, c2, ..."""
        [created] = await self._repository.create([self._new(body)])
        return _out(*created)

    async def import_jsonl(self, text: str) -> ImportResult:
        """One rubric per non-blank line, all stored or none (422 naming the first bad line)."""
        bodies = self._parse_lines(text)
        created = await self._repository.create([self._new(b, prefix) for prefix, b in bodies])
        return ImportResult(created=[_out(*pair) for pair in created], total=len(created))

    async def create_many(
        self, bodies: Sequence[RubricCreate], ids: list[str] | None = None
    ) -> list[RubricOut]:
        """Several new rubrics in one transaction (rubric synthesis keeps its instances so);
        ``ids`` chooses their ids (a resumed synthesis job's are derived from its job id, so
        that a retry cannot create one twice)."""
        if not bodies:
            return []
        news = [self._new(body, f"rubrics[{i}].") for i, body in enumerate(bodies)]
        return [_out(*pair) for pair in await self._repository.create(news, ids)]

    async def find(self, rubric_id: str) -> RubricOut | None:
        """The rubric's current version, or None when the caller sees no such rubric."""
        head = await self._repository.head(rubric_id)
        if head is None:
            return None
        return await self.get(rubric_id)

    async def update(self, rubric_id: str, body: RubricUpdate) -> RubricOut:
        """A new version made current; criteria sent with their id keep it."""
        head = await self._head(rubric_id)
        _check_expected(head, body.expected_version)
        check_name(body.name)
        check_rubric(body, self._settings)
        history = await self._repository.versions(head.id)
        known = {c["id"] for v in history for c in v.content["criteria"]}
        criteria, following = assign_ids(body.criteria, known=known, next_id=head.next_criterion)
        content = _content(body, criteria, body.name)
        saved = await self._repository.add_version(head, content, following, body.note)
        return _out(*saved)

    async def rollback(
        self,
        rubric_id: str,
        to: int,
        *,
        expected_version: int | None = None,
        note: str | None = None,
    ) -> RubricOut:
        """Make version ``to`` current again; every version is kept."""
        head = await self._head(rubric_id)
        _check_expected(head, expected_version)
        target = await self._version(head, to, param="to")
        moved = await self._repository.set_current(head, target, note)
        return _out(moved, target)

    # --- reads ----------------------------------------------------------------------------

    async def get(self, ref: str, version: int | None = None) -> RubricOut:
        """``rb_...`` (the current version), ``rb_...@N`` or ``version=N``."""
        rubric_id, at = _split_ref(ref)
        head = await self._head(rubric_id)
        number = version or at or head.current_version
        return _out(head, await self._version(head, number, param="version"))

    async def page(self, where: ListFilter, *, limit: int, offset: int) -> Page[RubricOut]:
        """The caller's rubrics (current versions), most recently changed first."""
        heads, total = await self._repository.page(where, limit=limit, offset=offset)
        items = [_out(h, await self._version(h, h.current_version, "version")) for h in heads]
        return Page(items=items, limit=limit, offset=offset, total=total)

    async def versions(self, rubric_id: str, *, limit: int, offset: int) -> Page[RubricVersionInfo]:
        head = await self._head(rubric_id)
        every = await self._repository.versions(head.id)
        items = [_version_info(v, head) for v in every[offset : offset + limit]]
        return Page(items=items, limit=limit, offset=offset, total=len(every))

    async def diff(self, rubric_id: str, old: int, new: int) -> RubricDiff:
        head = await self._head(rubric_id)
        a = await self._version(head, old, param="from")
        b = await self._version(head, new, param="to")
        return diff_versions(head.id, old, _content_of(a), new, _content_of(b))

    # --- scoring --------------------------------------------------------------------------

    async def score(self, request: ScoreRequest) -> ScoreResponse:
        """Per-completion rewards with every criterion's verdict; stored when run_id is set."""
        if request.rubric is not None:
            ref, rubric = self.inline(request.rubric, param="rubric")
        else:
            assert request.rubric_id is not None
            ref, rubric = await self.resolve(request.rubric_id, param="rubric_id")
        options = ScoreOptions.model_validate(
            request.model_dump(include=set(ScoreOptions.model_fields))
        )
        response = await self.score_resolved(
            ref, rubric, request.prompt, request.completions, options, use_cache=request.cache
        )
        await self._store(request, response)
        return response

    async def score_resolved(
        self,
        ref: RubricRef,
        rubric: RubricContent,
        prompt: Prompt | None,
        completions: Sequence[CompletionItem],
        options: ScoreOptions,
        *,
        use_cache: bool = True,
    ) -> ScoreResponse:
        """Score against a rubric already resolved (the ``rubric`` channel's entry point)."""
        self._check_size(len(completions))
        question = _question(prompt, rubric)
        return await score_completions(
            self._judge, rubric, ref, question, completions, options, use_cache=use_cache
        )

    async def resolve(self, ref: str, *, param: str) -> tuple[RubricRef, RubricContent]:
        """The rubric ``rb_...`` or ``rb_...@N`` names; unknown is the caller's 422."""
        rubric_id, at = _split_ref(ref)
        head = await self._repository.head(rubric_id)
        number = at or (head.current_version if head is not None else 0)
        found = None if head is None else await self._repository.version(head.id, number)
        if head is None:
            raise InvalidInput(f"unknown rubric {ref!r}", param=param)
        if found is None:
            raise InvalidInput(
                f"rubric {head.id} has no version {number} (versions 1 to {head.latest_version})",
                param=param,
            )
        content = _content_of(found)
        return RubricRef(id=head.id, version=found.version, name=content.name), content

    def inline(self, body: InlineRubric, *, param: str) -> tuple[RubricRef, RubricContent]:
        """A rubric sent with the request, checked like a stored one (not stored)."""
        check_rubric(body, self._settings, prefix=f"{param}.")
        criteria, _ = assign_ids(body.criteria, known=None, next_id=1, prefix=f"{param}.")
        content = RubricContent.model_validate(_content(body, criteria, body.name))
        return RubricRef(id=None, version=None, name=body.name), content

    def _check_size(self, count: int) -> None:
        if count > self._settings.max_completions:
            raise InvalidInput(
                f"{count} completions exceed the limit of {self._settings.max_completions}",
                param="completions",
            )

    async def _store(self, request: ScoreRequest, response: ScoreResponse) -> None:
        if request.run_id is None or self._scored_groups is None:
            return
        digest = content_hash(request.model_dump(exclude={"run_id", "step"}))
        await self._scored_groups.add_many(
            SERVICE, request.run_id, request.step, [(None, digest, response.model_dump())]
        )

    # --- helpers --------------------------------------------------------------------------

    def _new(self, body: RubricCreate, prefix: str = "") -> NewRubric:
        check_name(body.name, f"{prefix}name")
        check_rubric(body, self._settings, prefix=prefix)
        criteria, following = assign_ids(body.criteria, known=None, next_id=1, prefix=prefix)
        return NewRubric(content=_content(body, criteria, body.name), next_criterion=following)

    def _parse_lines(self, text: str) -> list[tuple[str, RubricCreate]]:
        lines = [(n, line) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]
        if not lines:
            raise InvalidInput("the file holds no rubric (one JSON object per line)", param="body")
        if len(lines) > self._settings.max_import_lines:
            raise InvalidInput(
                f"{len(lines)} rubrics exceed the limit of {self._settings.max_import_lines}",
                param="body",
            )
        return [(f"lines[{n}].", _parse_line(n, line)) for n, line in lines]

    async def _head(self, rubric_id: str) -> RubricHead:
        head = await self._repository.head(rubric_id)
        if head is None:
            raise NotFound(f"unknown rubric {rubric_id!r}", param="id")
        return head

    async def _version(self, head: RubricHead, number: int, param: str) -> RubricVersion:
        # Past the integer column's range no version can exist (Postgres would refuse the
        # query: a 500 in issue 23).
        found = await self._repository.version(head.id, number) if number <= INT32_MAX else None
        if found is None:
            raise NotFound(
                f"rubric {head.id} has no version {number} (versions 1 to {head.latest_version})",
                param=param,
            )
        return found


def _parse_line(number: int, line: str) -> RubricCreate:
    try:
        return _checked_line(number, line)
    except RecursionError:  # issue 23: one line nested 100,000 deep was a 500
        message = f"line {number}: JSON nested too deeply"
        raise InvalidInput(message, param=f"lines[{number}]") from None


def _checked_line(number: int, line: str) -> RubricCreate:
    try:
        row = json.loads(line)
    except json.JSONDecodeError as exc:
        message = f"line {number}: not JSON ({exc.msg})"
        raise InvalidInput(message, param=f"lines[{number}]") from None
    bad = find_surrogates(row, limit=1)
    if bad:
        where = format_loc(("body", *bad[0]))
        raise InvalidInput(
            f"line {number}: {where}: holds a lone UTF-16 surrogate (not valid Unicode)",
            param=f"lines[{number}]" + (f".{where}" if where else ""),
        )
    try:
        return RubricCreate.model_validate(row)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = format_loc(("body", *first.get("loc", ())))
        param = f"lines[{number}]" + (f".{where}" if where else "")
        raise InvalidInput(f"line {number}: {where}: {first.get('msg')}", param=param) from None


def _check_expected(head: RubricHead, expected: int | None) -> None:
    if expected is not None and expected != head.current_version:
        raise Conflict(
            f"rubric {head.id} is at version {head.current_version}, not {expected}: read it "
            "again and retry",
            param="expected_version",
        )


_VERSION = re.compile(r"[1-9][0-9]*")


def _split_ref(ref: str) -> tuple[str, int | None]:
    """``rb_x@2`` -> (``rb_x``, 2); ``rb_x`` -> (``rb_x``, None)."""
    rubric_id, at, number = ref.partition("@")
    if not at:
        return rubric_id, None
    if not _VERSION.fullmatch(number):
        raise InvalidInput(f"malformed rubric reference {ref!r}; expected id@version", param="id")
    return rubric_id, int(number)


def _question(prompt: Any, rubric: RubricContent) -> str:
    if prompt is not None:
        return prompt_text(prompt)
    if rubric.question:
        return rubric.question
    raise InvalidInput("give a prompt: the rubric has no question", param="prompt")


def _content(body: RubricFields, criteria: list[Any], name: str | None) -> dict[str, Any]:
    return {
        "name": name,
        "question": body.question,
        "reference_answer": body.reference_answer,
        "domain": body.domain,
        "source": body.source,
        "criteria": [c.model_dump() for c in criteria],
    }


def _content_of(version: RubricVersion) -> RubricContent:
    return RubricContent.model_validate(version.content)


def _out(head: RubricHead, version: RubricVersion) -> RubricOut:
    return RubricOut(
        **_content_of(version).model_dump(),
        id=head.id,
        version=version.version,
        current_version=head.current_version,
        latest_version=head.latest_version,
        created_at=_iso(head.created_at),
        updated_at=_iso(version.created_at),
    )


_iso = utc_iso


def _version_info(version: RubricVersion, head: RubricHead) -> RubricVersionInfo:
    return RubricVersionInfo(
        version=version.version,
        created_at=_iso(version.created_at),
        note=version.note,
        criteria=len(version.content.get("criteria", [])),
        content_hash=version.content_hash,
        current=version.version == head.current_version,
    )
