"""The judge service: pairwise verdicts with order swap, group tournaments, scale grades."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from judges.fencing import process_secret
from judges.templates import (
    PromptTemplate,
    RenderedPrompt,
    TemplateError,
    TemplateNotFoundError,
    load_template,
)
from plaudit_wire.judge import (
    CompletionJudged,
    GroupRequest,
    GroupResponse,
    JudgeOptions,
    JudgeStamp,
    ListwiseRequest,
    ListwiseResponse,
    PairOut,
    PairwiseRequest,
    PairwiseResponse,
    ScaleRequest,
    ScaleResponse,
    ScaleResult,
)
from plaudit_wire.schemas import Prompt, completion_ids
from services.core.db.records import ScoredGroupRepository, content_hash
from services.core.errors import BackendUnavailable, InvalidInput
from services.core.models.cached_judge import CachedJudge
from services.core.models.judge_model import JudgeModel
from services.judge import listwise, structured
from services.judge import orders as order_logic
from services.judge.listwise import ListwiseOutcome
from services.judge.pairing import ANCHOR, Pairing, make_pairs
from services.judge.scoring import PairOutcome, Scoring, score_group
from services.judge.settings import JudgeSettings

FAILED = ("error", "timeout", "invalid")
DEFAULT_TEMPLATES = {"logprob": "pairwise@2", "generate": "pairwise_json@2"}
DEFAULT_SCALE_TEMPLATE = "scale@2"


def prompt_text(prompt: Prompt) -> str:
    """The question the judge sees: the text, or the conversation as labelled turns."""
    if isinstance(prompt, str):
        return prompt
    return "\n\n".join(f"{m.role.capitalize()}: {m.content}" for m in prompt)


EMPTY_ERROR = "empty completion: graded 1 without asking the judge"


@dataclass(frozen=True)
class Grades:
    """The judge's 1..K grades of a group's completions (:meth:`JudgeService.grade`), one
    entry per completion: its grade distribution (None: not judged), status and error."""

    k: int
    distributions: list[list[float] | None]
    statuses: list[str]
    errors: list[str | None]
    stamp: JudgeStamp

    def expected(self) -> list[float | None]:
        """The expected grade of each completion."""
        return [
            None if d is None else sum((level + 1) * p for level, p in enumerate(d))
            for d in self.distributions
        ]

    def modes(self) -> list[int | None]:
        """The most likely grade of each completion."""
        return [
            None if d is None else max(range(len(d)), key=d.__getitem__) + 1
            for d in self.distributions
        ]


@dataclass(frozen=True)
class Tournament:
    """A pairwise tournament over a group (:meth:`JudgeService.tournament`): the pairs played
    and their judgments, then per completion its reward, tie flag, judged pairs and status."""

    pairs: list[tuple[int, int]]
    judged: list[order_logic.PairJudgment]
    rewards: list[float | None]
    tie_mask: list[bool]
    judged_pairs: list[int]
    statuses: list[str]
    stamp: JudgeStamp

    def inconsistency_rate(self) -> float | None:
        """The share of pairs whose two orders disagree."""
        return _inconsistency(self.judged)


class JudgeService:
    """Turns judge requests into batched backend calls and the answers into rewards."""

    def __init__(
        self,
        settings: JudgeSettings,
        judge: CachedJudge,
        scored_groups: ScoredGroupRepository | None = None,
    ) -> None:
        self._settings = settings
        self._judge = judge
        self._scored_groups = scored_groups
        secret = settings.fence_secret
        self._model = JudgeModel(
            judge, secret.get_secret_value().encode() if secret is not None else process_secret()
        )

    @property
    def channel_cache(self) -> bool:
        """Whether the judge's reward channels use the judge cache (``JUDGE_CHANNEL_CACHE``)."""
        return self._settings.channel_cache

    @property
    def model(self) -> JudgeModel:
        """The judge's model port, shared with the services that ask the same judge (rubrics,
        synthesis, the memory): its cached backend and fence codes."""
        return self._model

    async def pairwise(self, request: PairwiseRequest) -> PairwiseResponse:
        """P(a better) over both orders, the winner and whether the orders agreed."""
        template = self.template_for(request)
        [pair] = await self.judge_pairs(
            template,
            prompt_text(request.prompt),
            [(request.response_a, request.response_b)],
            request,
        )
        if pair.status == "invalid":  # e.g. longer than the judge's input limit: no retry helps
            raise InvalidInput(f"the judge cannot take this pair: {_first_error(pair)}")
        if pair.status in FAILED:
            raise BackendUnavailable(
                f"the judge could not answer: {_first_error(pair)}",
                retry_after=JUDGE_RETRY_AFTER_S,
            )
        return PairwiseResponse(
            p_a=pair.p_a,
            winner=pair.winner,
            consistent=pair.consistent,
            status=pair.status,
            orders=[_order_out(o) for o in pair.orders],
            judge=self._stamp(template, request, _sources([pair])),
        )

    async def group(self, request: GroupRequest) -> GroupResponse:
        """Per-completion rewards of one group from pairwise judgments."""
        played = await self.tournament(
            prompt_text(request.prompt),
            [c.text for c in request.completions],
            request,
            pairing=request.pairing,
            anchor=request.anchor,
            budget=request.budget,
            seed=request.seed,
            scoring=request.scoring,
            truncated=truncated_flags(
                len(request.completions), request.truncated, request.finish_reasons
            ),
            lengths=request.lengths,
            length_discount=request.length_discount,
        )
        response = _group_response(request, played)
        await self._store("judge.group", request, response.model_dump())
        return response

    async def tournament(
        self,
        question: str,
        texts: Sequence[str],
        options: JudgeOptions,
        *,
        pairing: Pairing = "adjacent",
        anchor: str | None = None,
        budget: int | None = None,
        seed: int = 0,
        scoring: Scoring = "pprgde",
        truncated: Sequence[bool] | None = None,
        lengths: Sequence[float] | None = None,
        length_discount: bool = False,
    ) -> Tournament:
        """A pairwise tournament over ``texts`` answering ``question``: the port the HTTP route
        and the ``judge_pairwise`` channel share (issue 20: no HTTP models inside the process).
        ``lengths`` default to word counts; ``truncated`` marks completions cut off."""
        g = len(texts)
        self._check_group_size(g)
        template = self.template_for(options)
        pairs = make_pairs(pairing, g, budget=budget, seed=seed)
        if len(pairs) > self._settings.max_pairs:
            raise InvalidInput(
                f"{len(pairs)} pairs exceed the limit of {self._settings.max_pairs}; "
                "set a round_robin budget",
                param="budget",
            )

        def text(index: int) -> str:
            return (anchor or "") if index == ANCHOR else texts[index]

        judged = await self.judge_pairs(
            template, question, [(text(i), text(j)) for i, j in pairs], options
        )
        _unavailable_if_nothing_judged([p.status for p in judged], _first_error(judged[0]))
        outcomes = [
            PairOutcome(i, j, p.p_a, p.winner if p.status not in FAILED else None)
            for (i, j), p in zip(pairs, judged, strict=True)
        ]
        scores = score_group(
            scoring,
            outcomes,
            g,
            truncated=list(truncated or [False] * g),
            lengths=list(lengths or [float(word_count(t)) for t in texts]),
            length_discount=length_discount,
        )
        return Tournament(
            pairs=pairs,
            judged=judged,
            rewards=scores.rewards,
            tie_mask=scores.tie_mask,
            judged_pairs=scores.judged_pairs,
            statuses=_completion_statuses(g, pairs, judged),
            stamp=self._stamp(template, options, _sources(judged)),
        )

    async def scale(self, request: ScaleRequest) -> ScaleResponse:
        """A 1..K grade distribution per completion (ready for /v1/ordinal/advantages)."""
        grades = await self.grade(
            prompt_text(request.prompt),
            [c.text for c in request.completions],
            k=request.k,
            criteria=request.criteria,
            template=request.template,
            cache=request.cache,
        )
        expected, modes = grades.expected(), grades.modes()
        results = [
            ScaleResult(
                id=cid,
                distribution=grades.distributions[i],
                expected=expected[i],
                mode=modes[i],
                status=grades.statuses[i],
                error=grades.errors[i],
            )
            for i, cid in enumerate(completion_ids(request.completions))
        ]
        response = ScaleResponse(k=request.k, results=results, judge=grades.stamp)
        await self._store("judge.scale", request, response.model_dump())
        return response

    async def grade(
        self,
        question: str,
        texts: Sequence[str],
        *,
        k: int,
        criteria: str | None = None,
        template: str | None = None,
        cache: bool = True,
    ) -> Grades:
        """1..K grades of ``texts`` answering ``question``: the port the HTTP route and the
        ``judge_scale`` channel share (issue 20: no HTTP models inside the process)."""
        chosen = _load(template or DEFAULT_SCALE_TEMPLATE, "choice")
        self._check_group_size(len(texts))
        code = self.fence_code(chosen, question)
        judged = [i for i, text in enumerate(texts) if text.strip()]
        requests = [
            _render(
                chosen, code, question=question, response=texts[i], k=k, criteria=criteria
            ).choice_request()
            for i in judged
        ]
        outcomes = await self._judge.score_choices(requests, use_cache=cache) if requests else []
        # An empty completion (no text, e.g. an EOS-only response) is not sent to the judge:
        # it gets the lowest grade with certainty, flagged ``empty`` (issue 22: a small judge
        # graded empty answers among the highest of their group).
        floor = [1.0] + [0.0] * (k - 1)
        distributions: list[list[float] | None] = [list(floor) for _ in texts]
        statuses: list[str] = ["empty"] * len(texts)
        errors: list[str | None] = [EMPTY_ERROR] * len(texts)
        for i, out in zip(judged, outcomes, strict=True):
            distributions[i] = list(out.probs) if out.ok and out.probs is not None else None
            statuses[i] = "ok" if distributions[i] is not None else out.status
            errors[i] = None if distributions[i] is not None else out.error
        if judged:
            _unavailable_if_nothing_judged([statuses[i] for i in judged], errors[judged[0]])
        source = _summary(["parsed" if o.coverage is None else "logprob" for o in outcomes if o.ok])
        info = self._judge.backend.info
        stamp = JudgeStamp(
            backend=info.name,
            model=info.model_id,
            template=chosen.ref,
            mode="generate" if source == "parsed" else "logprob",
            sampling={"temperature": 0.0},
            verdict_source=source,
            choice_scoring=_choice_scoring(info.details),
        )
        return Grades(k, distributions, statuses, errors, stamp)

    async def listwise(self, request: ListwiseRequest) -> ListwiseResponse:
        """A 0..10 score per completion from one judge call over the whole group."""
        outcome, stamp = await self.rank_listwise(
            prompt_text(request.prompt),
            [c.text for c in request.completions],
            criteria=request.criteria,
            template=request.template,
            max_new_tokens=request.max_new_tokens,
            cache=request.cache,
        )
        response = listwise.response(completion_ids(request.completions), outcome, stamp)
        await self._store("judge.listwise", request, response.model_dump())
        return response

    async def rank_listwise(
        self,
        question: str,
        texts: Sequence[str],
        *,
        criteria: str | None = None,
        template: str | None = None,
        max_new_tokens: int | None = None,
        cache: bool = True,
    ) -> tuple[ListwiseOutcome, JudgeStamp]:
        """The whole group scored in one judge call: the port the HTTP route and the
        ``judge_listwise`` channel share (issue 20: no HTTP models inside the process)."""
        self._check_group_size(len(texts))
        chosen = _load(template or listwise.DEFAULT_TEMPLATE, "generate")
        outcome = await listwise.judge_group(
            functools.partial(self._judge.generate, use_cache=cache),
            chosen,
            self.fence_code(chosen, question) or "",
            question,
            list(texts),
            criteria=criteria,
            max_new_tokens=max_new_tokens,
        )
        _unavailable_if_nothing_judged(outcome.statuses, outcome.errors[0])
        info = self._judge.backend.info
        stamp = JudgeStamp(
            backend=info.name,
            model=info.model_id,
            template=chosen.ref,
            mode="generate",
            sampling={
                "temperature": 0.0,
                "max_new_tokens": max_new_tokens or listwise.reply_budget(len(texts)),
            },
        )
        return outcome, stamp

    async def judge_pairs(
        self,
        template: PromptTemplate,
        question: str,
        pairs: Sequence[tuple[str, str]],
        options: JudgeOptions,
    ) -> list[order_logic.PairJudgment]:
        """Every pair in every order, sent to the backend as one batch."""
        plan: list[tuple[int, order_logic.Order]] = []
        rows = []
        for index, (a, b) in enumerate(pairs):
            for order in ("ab", "ba") if options.swap else ("ab",):
                first, second = (a, b) if order == "ab" else (b, a)
                rows.append({"response_a": first, "response_b": second})
                plan.append((index, order))
        code = self.fence_code(template, question)
        prompts = _render_many(template, code, rows, criteria=options.criteria, question=question)
        per_pair: list[list[order_logic.OrderJudgment]] = [[] for _ in pairs]
        if options.mode == "logprob":
            choice = await self._judge.score_choices(
                [p.choice_request() for p in prompts], use_cache=options.cache
            )
            for (index, order), result in zip(plan, choice, strict=True):
                per_pair[index].append(order_logic.from_choice(order, result))
        else:
            judged = await self._generate_orders(template, prompts, [o for _, o in plan], options)
            if options.verdict_fallback == "score" and self._judge.backend.info.supports_logprobs:
                judged = await self._score_unparsed(prompts, judged, options.cache)
            for (index, _), judgment in zip(plan, judged, strict=True):
                per_pair[index].append(judgment)
        return [order_logic.combine(tuple(o), options.tie_margin) for o in per_pair]

    async def _generate_orders(
        self,
        template: PromptTemplate,
        prompts: Sequence[RenderedPrompt],
        orders: Sequence[order_logic.Order],
        options: JudgeOptions,
    ) -> list[order_logic.OrderJudgment]:
        """A reply per prompt: a JSON verdict under a schema (``parser = "json"``
        templates), else free text with a parsed ``Verdict:`` line."""
        call = functools.partial(self._judge.generate, use_cache=options.cache)
        if template.parser == structured.JSON_PARSER:
            return await structured.judge_structured(call, prompts, orders, options.max_new_tokens)
        generated = await call([p.generate_request(options.max_new_tokens) for p in prompts])
        return [
            order_logic.from_generation(order, gen)
            for order, gen in zip(orders, generated, strict=True)
        ]

    async def _score_unparsed(
        self,
        prompts: Sequence[RenderedPrompt],
        judged: list[order_logic.OrderJudgment],
        use_cache: bool,
    ) -> list[order_logic.OrderJudgment]:
        """Replies without a parseable verdict get their letter scored after the reply."""
        todo = [i for i, o in enumerate(judged) if o.status == "unparseable" and o.reply]
        if not todo or not prompts[0].verdict_prefix:
            return judged
        scored = await self._judge.score_choices(
            [prompts[i].verdict_request(judged[i].reply or "") for i in todo], use_cache=use_cache
        )
        out = list(judged)
        for i, result in zip(todo, scored, strict=True):
            out[i] = order_logic.from_scored_verdict(judged[i], result)
        return out

    async def _store(
        self,
        service: str,
        request: GroupRequest | ScaleRequest | ListwiseRequest,
        result: dict[str, Any],
    ) -> None:
        """Keep the scored group for the run's audit when the request names a run."""
        if request.run_id is None or self._scored_groups is None:
            return
        await self._scored_groups.add_many(
            service,
            request.run_id,
            request.step,
            [(None, content_hash(request.model_dump()), result)],
        )

    def _check_group_size(self, g: int) -> None:
        if g > self._settings.max_group_size:
            raise InvalidInput(
                f"{g} completions exceed the limit of {self._settings.max_group_size}",
                param="completions",
            )

    def fence_code(self, template: PromptTemplate, question: str) -> str | None:
        """The boundary code of a request's prompts (None: the template has no boundary)."""
        return self._model.fence_code(template, question)

    def template_for(self, options: JudgeOptions) -> PromptTemplate:
        ref = options.template or DEFAULT_TEMPLATES[options.mode]
        return _load(ref, "choice" if options.mode == "logprob" else "generate")

    def _stamp(
        self, template: PromptTemplate, options: JudgeOptions, sources: list[str]
    ) -> JudgeStamp:
        """What produced the verdicts; ``sources`` are the judged orders' verdict sources, so
        a logprob call that a server answered without logprobs says so (issue 19)."""
        info = self._judge.backend.info
        source = _summary(sources)
        sampling: dict[str, float | int | None] = {"temperature": 0.0}
        if options.mode == "generate":
            sampling["max_new_tokens"] = options.max_new_tokens
            sampling["verdict_fallback"] = int(
                options.verdict_fallback == "score" and info.supports_logprobs
            )
            sampling["structured"] = int(template.parser == structured.JSON_PARSER)
        parsed_only = options.mode == "logprob" and source == "parsed"
        return JudgeStamp(
            backend=info.name,
            model=info.model_id,
            template=template.ref,
            mode="generate" if parsed_only else options.mode,
            sampling=sampling,
            verdict_source=source,
            choice_scoring=_choice_scoring(info.details),
        )


def _sources(judged: Sequence[order_logic.PairJudgment]) -> list[str]:
    return [o.source for p in judged for o in p.orders if o.source is not None]


def _summary(sources: Sequence[str]) -> Any:
    """The one source of every verdict, ``mixed``, or None when nothing was judged."""
    distinct = set(sources)
    return distinct.pop() if len(distinct) == 1 else ("mixed" if distinct else None)


def _choice_scoring(details: dict[str, str]) -> Any:
    value = details.get("choice_scoring")
    return value if value in ("sequence", "first_token") else None


def _load(ref: str, kind: str) -> PromptTemplate:
    try:
        template = load_template(ref)
    except TemplateNotFoundError as exc:
        raise InvalidInput(str(exc), param="template") from None
    if template.kind != kind:
        raise InvalidInput(
            f"template {template.ref} is a {template.kind} template; this mode needs a {kind} one",
            param="template",
        )
    return template


def _render(
    template: PromptTemplate, code: str | None, *, criteria: str | None, **values: object
) -> RenderedPrompt:
    [prompt] = _render_many(template, code, [{}], criteria=criteria, **values)
    return prompt


def _render_many(
    template: PromptTemplate,
    code: str | None,
    rows: Sequence[Mapping[str, object]],
    *,
    criteria: str | None,
    **shared: object,
) -> list[RenderedPrompt]:
    """Every row's prompt; values shared by the rows are neutralised once (issue 19)."""
    if criteria is not None:
        if "criteria" not in template.variables:
            raise InvalidInput(f"template {template.ref} takes no criteria", param="criteria")
        shared["criteria"] = criteria
    try:
        return template.render_many(code, rows, **shared)
    except TemplateError as exc:
        raise InvalidInput(str(exc), param="template") from None


def _order_out(o: order_logic.OrderJudgment) -> dict[str, object]:
    return {
        "order": o.order,
        "p_first": o.p_first,
        "status": o.status,
        "verdict": o.verdict,
        "error": o.error,
        "reply": o.reply,
        "verdict_source": o.source,
    }


#: Retry-After of a judge that failed every item: its backend already retried each call, so
#: a short wait before the caller's next try (the 503 named no time before).
JUDGE_RETRY_AFTER_S = 5.0


def word_count(text: str) -> int:
    """Runs of non-whitespace in ``text``: what ``re.findall(r"\\S+", text)`` counts (the
    same whitespace, tested over every code point), without a list of matches."""
    return len(text.split())


def _unavailable_if_nothing_judged(statuses: Sequence[str], error: str | None) -> None:
    """503 when no item was judged because the backend failed (a retry may help). Items that
    are all ``invalid`` (too long for the judge) are the caller's data: 200 with statuses."""
    if all(s in FAILED for s in statuses) and any(s != "invalid" for s in statuses):
        raise BackendUnavailable(
            f"the judge could not answer: {error}", retry_after=JUDGE_RETRY_AFTER_S
        )


def _first_error(pair: order_logic.PairJudgment) -> str:
    for o in pair.orders:
        if o.error:
            return o.error
    return pair.status


def _group_response(request: GroupRequest, played: Tournament) -> GroupResponse:
    ids = completion_ids(request.completions)
    label = {ANCHOR: "anchor", **dict(enumerate(ids))}
    return GroupResponse(
        scoring=request.scoring,
        pairing=request.pairing,
        rewards=played.rewards,
        tie_mask=played.tie_mask,
        status=played.statuses,
        results=[
            CompletionJudged(
                id=cid,
                reward=played.rewards[i],
                tie=played.tie_mask[i],
                pairs=played.judged_pairs[i],
                status=played.statuses[i],
            )
            for i, cid in enumerate(ids)
        ],
        pairs=[
            PairOut(
                a=label[i],
                b=label[j],
                p_a=p.p_a,
                winner=p.winner,
                consistent=p.consistent,
                status=p.status,
            )
            for (i, j), p in zip(played.pairs, played.judged, strict=True)
        ],
        inconsistency_rate=played.inconsistency_rate(),
        first_slot_rate=_first_slot_rate(played.judged),
        judge=played.stamp,
    )


def truncated_flags(
    g: int, truncated: Sequence[bool] | None, finish_reasons: Sequence[str | None] | None
) -> list[bool]:
    """Which of ``g`` completions were cut off: flagged, or finished for ``length``."""
    flags = list(truncated or [False] * g)
    if finish_reasons:
        flags = [f or r == "length" for f, r in zip(flags, finish_reasons, strict=True)]
    return flags


def _completion_statuses(
    g: int, pairs: list[tuple[int, int]], judged: list[order_logic.PairJudgment]
) -> list[str]:
    seen: list[list[str]] = [[] for _ in range(g)]
    for (i, j), p in zip(pairs, judged, strict=True):
        for index in (i, j):
            if index != ANCHOR:
                seen[index].append(p.status)
    return [
        "ok" if any(s not in FAILED for s in mine) else (mine[0] if mine else "ok") for mine in seen
    ]


def _inconsistency(judged: list[order_logic.PairJudgment]) -> float | None:
    both = [p for p in judged if p.consistent is not None]
    return sum(1 for p in both if not p.consistent) / len(both) if both else None


def _first_slot_rate(judged: list[order_logic.PairJudgment]) -> float | None:
    verdicts = [o.verdict for p in judged for o in p.orders if o.status == "ok" and o.verdict]
    return sum(1 for v in verdicts if v == "first") / len(verdicts) if verdicts else None
