"""Wire models of the judge service."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from plaudit_wire.limits import MaxNewTokens, Text
from plaudit_wire.schemas import (
    INT32_MAX,
    Completions,
    FinishReasons,
    ItemStatus,
    Prompt,
    RunTag,
    Seed,
    StoredModel,
    StrictModel,
    TemplateRef,
    exactly_one_of,
)

Mode = Literal["logprob", "generate"]
VerdictSource = Literal["logprob", "parsed", "scored", "structured"]


class JudgeOptions(StrictModel):
    criteria: str | None = Field(
        default=None,
        max_length=4000,
        description="what 'better' means (default: helpful, correct, clear)",
    )
    mode: Mode = Field(
        default="logprob",
        description="logprob: one forward pass per order (P(A) vs P(B)); generate: reason, "
        "then a verdict (the default template asks for a JSON object under a schema)",
    )
    swap: bool = Field(default=True, description="judge both orders (position-bias control)")
    template: TemplateRef | None = Field(
        default=None, description="template name@version (default pairwise@2 / pairwise_json@2)"
    )
    tie_margin: float = Field(
        default=0.0, ge=0, le=0.5, description="|p_a - 0.5| below this is a tie"
    )
    max_new_tokens: MaxNewTokens = Field(default=256, ge=1, description="generate mode only")
    verdict_fallback: Literal["score", "none"] = Field(
        default="score",
        description="generate mode: when a reply has no parseable verdict, 'score' reads "
        "P(A) vs P(B) right after the reply and 'Verdict: [[' (backends with logprobs); "
        "'none' leaves the order unparseable (a tie)",
    )
    cache: bool = Field(default=True, description="use the judge cache")


class PairwiseRequest(JudgeOptions):
    """Example: ``{"prompt": "2+2?", "response_a": "4", "response_b": "5"}``"""

    prompt: Prompt
    response_a: Text
    response_b: Text


class OrderResult(BaseModel):
    order: Literal["ab", "ba"]
    p_first: float | None
    status: ItemStatus
    verdict: Literal["first", "second"] | None = None
    error: str | None = None
    reply: str | None = None
    verdict_source: VerdictSource | None = Field(
        default=None,
        description="logprob: letter probabilities; parsed: the reply's verdict line; "
        "scored: letter probabilities after a reply without a parseable verdict; "
        "structured: the verdict field of a reply generated under a JSON schema",
    )


class JudgeStamp(BaseModel):
    backend: str
    model: str
    template: str
    mode: Mode = Field(
        description="how the verdicts were obtained: 'logprob' (probabilities) or 'generate' "
        "(generated replies); a logprob request whose server gave no logprobs for every item "
        "says 'generate'"
    )
    sampling: dict[str, float | int | None]
    verdict_source: VerdictSource | Literal["mixed"] | None = Field(
        default=None,
        description="where this call's verdicts came from (see OrderResult.verdict_source; "
        "'parsed' in logprob mode: the server gave no logprobs for that call, issue 19); "
        "'mixed' when items differ, null when none was judged",
    )
    choice_scoring: Literal["sequence", "first_token"] | None = Field(
        default=None,
        description="how candidates of several tokens (a grade of 10) are scored: 'sequence' "
        "(every candidate's full token sequence), 'first_token' (read from the first token's "
        "list: only single-token candidates are exact); null: not said by the backend",
    )


class PairwiseResponse(BaseModel):
    p_a: float | None
    winner: Literal["a", "b", "tie"] | None
    consistent: bool | None
    status: ItemStatus
    orders: list[OrderResult]
    judge: JudgeStamp


class GroupRequest(JudgeOptions, RunTag):
    """The G completions of one prompt, judged in pairs."""

    prompt: Prompt
    completions: Completions = Field(min_length=2)
    pairing: Literal["adjacent", "round_robin", "anchor"] = "adjacent"
    anchor: Text | None = Field(default=None, description="reference completion (pairing=anchor)")
    budget: int | None = Field(
        default=None,
        ge=1,
        le=INT32_MAX,
        description="round_robin: judge this many random pairs, not all",
    )
    seed: Seed = Field(default=0, description="round_robin subset draw")
    scoring: Literal["pprgde", "win_rate", "bradley_terry"] = "pprgde"
    length_discount: bool = Field(
        default=False, description="pprgde: winners get shortest winner's length / own length"
    )
    truncated: list[bool] | None = Field(
        default=None, description="per completion: cut off before end-of-sequence"
    )
    finish_reasons: FinishReasons | None = Field(
        default=None, description="per completion ('length' = truncated), as trainers report"
    )
    lengths: list[float] | None = Field(
        default=None, description="per completion token counts (default: word counts)"
    )

    @model_validator(mode="after")
    def _anchor_given(self) -> GroupRequest:
        if self.pairing == "anchor" and self.anchor is None:
            raise ValueError("pairing 'anchor' needs the anchor text")
        g = len(self.completions)
        for name in ("truncated", "finish_reasons", "lengths"):
            values = getattr(self, name)
            if values is not None and len(values) != g:
                raise ValueError(f"{name} needs one entry per completion ({g})")
        return self


class PairOut(BaseModel):
    a: str
    b: str
    p_a: float | None
    winner: Literal["a", "b", "tie"] | None
    consistent: bool | None
    status: ItemStatus


class CompletionJudged(BaseModel):
    id: str
    reward: float | None
    tie: bool
    pairs: int
    status: ItemStatus


class GroupResponse(BaseModel):
    kind: Literal["rewards"] = "rewards"
    scoring: str
    pairing: str
    rewards: list[float | None]
    tie_mask: list[bool]
    status: list[ItemStatus]
    results: list[CompletionJudged]
    pairs: list[PairOut]
    inconsistency_rate: float | None
    first_slot_rate: float | None
    judge: JudgeStamp


class ScaleRequest(RunTag):
    """Pointwise grades on 1..K from the level tokens' probabilities."""

    prompt: Prompt
    completions: Completions = Field(min_length=1)
    k: int = Field(default=10, ge=2, le=100)
    criteria: str | None = Field(default=None, max_length=4000)
    template: TemplateRef | None = Field(default=None, description="default scale@2")
    cache: bool = True


class ScaleResult(BaseModel):
    id: str
    distribution: list[float] | None
    expected: float | None
    mode: int | None
    status: ItemStatus
    error: str | None = None


class ScaleResponse(BaseModel):
    kind: Literal["rewards"] = "rewards"
    k: int
    results: list[ScaleResult]
    judge: JudgeStamp


class ListwiseRequest(RunTag):
    """Every completion of a group scored 0..10 in one judge call (listwise, as RULER does).

    Example: ``{"prompt": "2+2?", "completions": [{"text": "4"}, {"text": "5"}]}``
    """

    prompt: Prompt
    completions: Completions = Field(min_length=2)
    criteria: str | None = Field(
        default=None,
        max_length=4000,
        description="what 'better' means (default: helpful, correct and clear)",
    )
    template: TemplateRef | None = Field(default=None, description="default listwise@1")
    max_new_tokens: MaxNewTokens | None = Field(
        default=None,
        ge=16,
        description="tokens of the JSON reply; default 16 per completion plus 16 (SmolLM2 "
        "writes about 15 per entry)",
    )
    cache: bool = True


class ListwiseResult(BaseModel):
    id: str
    reward: float | None = Field(description="the judge's score / 10, in [0, 1]")
    status: ItemStatus
    error: str | None = None


class ListwiseResponse(BaseModel):
    kind: Literal["rewards"] = "rewards"
    results: list[ListwiseResult]
    calls: int = Field(description="judge calls made: 1, or 2 when the reply was asked again")
    completion_tokens: int
    judge: JudgeStamp


class EvaluationRequest(StoredModel):
    """Agreement of the server's judge with MT-Bench human votes, run as a job.

    Example: ``{"votes": [<MT-Bench JSONL rows>], "limit": 40, "seed": 0}``, or, with an admin
    key, ``{"data": "/data/mtbench_human/test.jsonl", "limit": 300}``.
    """

    model_config = ConfigDict(json_schema_extra=exactly_one_of("data", "votes"))

    data: str | None = Field(
        default=None,
        max_length=1000,
        description="a JSONL file of MT-Bench human votes on the server (admin keys only); "
        "relative paths are under the data directory",
    )
    votes: list[dict[str, Any]] | None = Field(
        default=None, min_length=1, max_length=5000, description="the votes inline: JSONL rows"
    )
    source: str | None = Field(
        default=None, max_length=200, description="where inline votes came from (for the report)"
    )
    method: Literal["pairwise", "scale"] = Field(
        default="pairwise", description="pairwise (both orders) or scale (each answer alone)"
    )
    k: int = Field(default=10, ge=2, le=100, description="scale method: grades 1..K")
    mode: Mode = "logprob"
    swap: bool = True
    template: TemplateRef | None = None
    limit: int | None = Field(
        default=None, ge=1, le=INT32_MAX, description="stratified sample size"
    )
    seed: Seed = 0
    non_tie_only: bool = False
    max_chars: int = Field(default=1500, ge=100, le=100_000, description="truncate each answer")
    max_new_tokens: int = Field(default=128, ge=1, le=4096, description="generate mode budget")
    verdict_fallback: Literal["score", "none"] = "score"
    batch: int = Field(default=4, ge=1, le=64, description="votes judged concurrently")

    @model_validator(mode="after")
    def _one_source(self) -> EvaluationRequest:
        if (self.data is None) == (self.votes is None):
            raise ValueError("give either data (a file on the server) or votes (inline)")
        return self
