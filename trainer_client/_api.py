"""The Plaudit endpoints, written once for both clients.

Each method builds a :class:`Call` and hands it to ``_call``, which the sync client answers with
the parsed JSON and the async client with an awaitable of it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar
from urllib.parse import quote

from pydantic import BaseModel

from plaudit_wire.diversity import DiversityBatchResponse, DiversityResponse
from plaudit_wire.judge import GroupResponse, PairwiseResponse, ScaleResponse
from plaudit_wire.ordinal import AdvantagesResponse, DecomposeResponse
from plaudit_wire.rewards import RewardsGroupRequest, RewardsGroupResponse, ValidateResponse

JSONObject = dict[str, Any]
#: A completion: its text, or ``{"id": ..., "text": ...}``.
Completion = str | Mapping[str, Any]
#: A prompt: its text, or chat messages ``[{"role": ..., "content": ...}]``.
Prompt = str | Sequence[Mapping[str, Any]]

R = TypeVar("R")

#: The server's answer model for each endpoint method: the clients read every answer through
#: it (issue 20: one wire package for both sides), so an answer that does not match, from a
#: server of another version, is a clear error rather than a KeyError in the trainer. Fields
#: the model does not know are let through (a newer server may add some).
ANSWERS: dict[str, type[BaseModel]] = {
    "/v1/ordinal/advantages": AdvantagesResponse,
    "/v1/ordinal/decompose": DecomposeResponse,
    "/v1/diversity/group": DiversityResponse,
    "/v1/diversity/groups": DiversityBatchResponse,
    "/v1/judge/pairwise": PairwiseResponse,
    "/v1/judge/group": GroupResponse,
    "/v1/judge/scale": ScaleResponse,
    "/v1/rewards/group": RewardsGroupResponse,
    "/v1/rewards/validate": ValidateResponse,
}


@dataclass(frozen=True)
class Call:
    """One logical API call; its retries share ``idempotency_key``."""

    method: str
    path: str
    json: Any = None
    params: Mapping[str, Any] | None = None
    idempotency_key: str | None = None
    max_retries: int | None = None
    #: The wire model the answer must match (None: any JSON object).
    answer: type[BaseModel] | None = None


def body(fields: Mapping[str, Any], options: Mapping[str, Any]) -> JSONObject:
    """The request body: ``fields`` without the Nones, then the caller's extra ``options``."""
    out = {name: value for name, value in fields.items() if value is not None}
    out.update(options)
    return out


def _score_group(group: Sequence[float] | Mapping[str, Any]) -> Any:
    return dict(group) if isinstance(group, Mapping) else {"scores": list(group)}


def _completion_group(group: Sequence[Completion] | Mapping[str, Any]) -> Any:
    if isinstance(group, Mapping):
        return dict(group)
    if isinstance(group, str):
        raise TypeError("a group is a list of completions, not one string")
    return {"completions": [_completion(c) for c in group]}


def _completion(item: Completion) -> Any:
    return item if isinstance(item, str) else dict(item)


def _completions(items: Sequence[Completion]) -> list[Any]:
    if isinstance(items, str):
        raise TypeError("completions is a list of completions, not one string")
    return [_completion(c) for c in items]


def _prompt(prompt: Prompt) -> Any:
    return prompt if isinstance(prompt, str) else [dict(m) for m in prompt]


class Endpoints(Generic[R]):
    """The endpoint methods shared by ``PlauditClient`` (``R`` = dict) and
    ``AsyncPlauditClient`` (``R`` = awaitable dict). Extra keyword ``options`` go into the
    request body as they are; the server rejects unknown ones with :class:`InvalidRequest`."""

    def _call(self, call: Call) -> R:
        raise NotImplementedError

    def ordinal_advantages(
        self,
        groups: Sequence[Sequence[float] | Mapping[str, Any]],
        *,
        k: int | None = None,
        estimator: str = "odrpo",
        run_id: str | None = None,
        step: int | None = None,
        idempotency_key: str | None = None,
        **options: Any,
    ) -> R:
        """Group advantages from discrete judge scores 1..K (``odrpo``, ``grpo``, ``maxrl``,
        ``dr_grpo``). A group is a list of scores or ``{"id", "scores", "k"}``.

        ::

            out = client.ordinal_advantages([[1, 3, 5, 5]], k=5, run_id="run-7", step=3)
            out["groups"][0]["advantages"]  # [-5.464, -0.845, 3.155, 3.155]
        """
        fields = {
            "groups": [_score_group(g) for g in groups],
            "k": k,
            "estimator": estimator,
            "run_id": run_id,
            "step": step,
        }
        return self._post("/v1/ordinal/advantages", body(fields, options), idempotency_key)

    def ordinal_decompose(
        self,
        scores: Sequence[float],
        *,
        k: int | None = None,
        bin_edges: Sequence[float] | None = None,
    ) -> R:
        """Each score's binary ladder ``[score >= k]`` for k = 2..K.

        ::

            client.ordinal_decompose([1, 3, 5], k=5)["indicators"]  # [[0,0,0,0], [1,1,0,0], ...]
        """
        edges = None if bin_edges is None else list(bin_edges)
        fields = {"scores": list(scores), "k": k, "bin_edges": edges}
        return self._post("/v1/ordinal/decompose", body(fields, {}), None)

    def diversity_group(
        self,
        completions: Sequence[Completion],
        *,
        group_id: str | None = None,
        metric: str | None = None,
        scaling: str | None = None,
        weight: float | None = None,
        run_id: str | None = None,
        step: int | None = None,
        idempotency_key: str | None = None,
        **options: Any,
    ) -> R:
        """Per-completion diversity rewards of one group (``metric``: ``centroid`` or
        ``pairwise_cosine``; ``scaling``: ``minmax`` or ``none``).

        ::

            client.diversity_group(["a cat", "a dog", "stock prices"])["rewards"]
        """
        fields = {
            "id": group_id,
            "completions": _completions(completions),
            "metric": metric,
            "scaling": scaling,
            "weight": weight,
            "run_id": run_id,
            "step": step,
        }
        return self._post("/v1/diversity/group", body(fields, options), idempotency_key)

    def diversity_groups(
        self,
        groups: Sequence[Sequence[Completion] | Mapping[str, Any]],
        *,
        run_id: str | None = None,
        step: int | None = None,
        idempotency_key: str | None = None,
        **options: Any,
    ) -> R:
        """Diversity rewards of many groups in one request, each scored within itself. A group
        is a list of completions or ``{"id", "completions"}``.

        ::

            out = client.diversity_groups([["a", "b"], {"id": "p2", "completions": ["x", "y"]}])
            [g["rewards"] for g in out["groups"]]
        """
        fields = {"groups": [_completion_group(g) for g in groups], "run_id": run_id, "step": step}
        return self._post("/v1/diversity/groups", body(fields, options), idempotency_key)

    def judge_pairwise(
        self,
        prompt: Prompt,
        response_a: str,
        response_b: str,
        *,
        mode: str | None = None,
        swap: bool | None = None,
        criteria: str | None = None,
        **options: Any,
    ) -> R:
        """Which of two responses is better, asked in both orders (``mode``: ``logprob`` or
        ``generate``).

        ::

            client.judge_pairwise("Capital of France?", "Paris.", "Lyon.")["winner"]  # "a"
        """
        fields = {
            "prompt": _prompt(prompt),
            "response_a": response_a,
            "response_b": response_b,
            "mode": mode,
            "swap": swap,
            "criteria": criteria,
        }
        return self._post("/v1/judge/pairwise", body(fields, options), None)

    def judge_group(
        self,
        prompt: Prompt,
        completions: Sequence[Completion],
        *,
        pairing: str | None = None,
        scoring: str | None = None,
        run_id: str | None = None,
        step: int | None = None,
        idempotency_key: str | None = None,
        **options: Any,
    ) -> R:
        """Rewards for the G completions of one prompt from pairwise judgments (``pairing``:
        ``adjacent``, ``round_robin``, ``anchor``; ``scoring``: ``pprgde``, ``win_rate``,
        ``bradley_terry``). A reward is None, never 0, when its pairs could not be judged.

        ::

            out = client.judge_group("Name a prime.", ["7", "9", "2"], pairing="round_robin")
            out["rewards"], out["tie_mask"], out["status"]
        """
        fields = {
            "prompt": _prompt(prompt),
            "completions": _completions(completions),
            "pairing": pairing,
            "scoring": scoring,
            "run_id": run_id,
            "step": step,
        }
        return self._post("/v1/judge/group", body(fields, options), idempotency_key)

    def judge_scale(
        self,
        prompt: Prompt,
        completions: Sequence[Completion],
        *,
        k: int | None = None,
        run_id: str | None = None,
        step: int | None = None,
        idempotency_key: str | None = None,
        **options: Any,
    ) -> R:
        """Pointwise grades on 1..K: each level's probability, the expected grade and the mode.

        ::

            grades = client.judge_scale("2 + 2?", ["4", "5"], k=10)["results"]
            [g["mode"] for g in grades]  # ready for ordinal_advantages(..., k=10)
        """
        fields = {
            "prompt": _prompt(prompt),
            "completions": _completions(completions),
            "k": k,
            "run_id": run_id,
            "step": step,
        }
        return self._post("/v1/judge/scale", body(fields, options), idempotency_key)

    def rewards_group(
        self,
        prompt: Prompt,
        completions: Sequence[Completion],
        spec: Mapping[str, Any],
        *,
        run_id: str | None = None,
        step: int | None = None,
        finish_reasons: Sequence[str | None] | None = None,
        token_counts: Sequence[int] | None = None,
        id: str | None = None,
        idempotency_key: str | None = None,
        columns: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> R:
        """Composite rewards for one prompt's G completions: every channel of ``spec`` (each
        with a weight) and their weighted ``total``, which is None, never 0, when a channel
        failed for that completion. ``finish_reasons`` and ``token_counts`` hold one entry per
        completion; ``columns`` the prompt's dataset columns that channels read (the
        ``rubric`` channel reads ``rubric_id``).

        ::

            spec = {"channels": {"diversity": {"weight": 0.5}, "judge_scale": {"k": 5}}}
            out = client.rewards_group("Name a prime.", ["7", "9", "2"], spec, run_id="r1", step=3)
            [(r["id"], r["total"], r["status"]) for r in out["results"]]
        """
        fields = {
            "id": id,
            "prompt": _prompt(prompt),
            "completions": _completions(completions),
            "spec": dict(spec),
            "finish_reasons": None if finish_reasons is None else list(finish_reasons),
            "token_counts": None if token_counts is None else list(token_counts),
            "run_id": run_id,
            "step": step,
            "columns": None if columns is None else dict(columns),
        }
        return self._post("/v1/rewards/group", body(fields, options), idempotency_key)

    def send_rewards_group(
        self, request: RewardsGroupRequest, *, idempotency_key: str | None = None
    ) -> R:
        """:meth:`rewards_group` with the request as the wire model the server validates
        (:class:`plaudit_wire.rewards.RewardsGroupRequest`); the trainer adapters send this.
        Read the answer with ``RewardsGroupResponse.model_validate``."""
        payload = request.model_dump(mode="json", exclude_unset=True)
        # Not checked here: the caller reads the answer through the same model (the adapters'
        # read_group), so checking it twice would only cost the trainer's hot path.
        call = Call("POST", "/v1/rewards/group", json=payload, idempotency_key=idempotency_key)
        return self._call(call)

    def rewards_validate(self, spec: Mapping[str, Any]) -> R:
        """A dry run of a reward spec: ``valid``, the resolved spec (defaults filled) and its
        ``spec_hash``, or ``errors`` naming each bad field. Scores nothing.

        ::

            client.rewards_validate({"channels": {"foo": {}}})["errors"][0]["param"]
            # 'spec.channels.foo'
        """
        return self._post("/v1/rewards/validate", {"spec": dict(spec)}, None)

    def reward_runs(
        self, run_id: str, *, step: int | None = None, limit: int = 100, offset: int = 0
    ) -> R:
        """The reward groups scored for ``run_id`` (``rewards_group`` calls that carried it),
        oldest first, each with its spec hash: ``run_groups(run_id, service="rewards")``.

        ::

            page = client.reward_runs("run-7", step=3)
            [g["result"]["spec_hash"] for g in page["items"]], page["total"]
        """
        return self.run_groups(run_id, step=step, service="rewards", limit=limit, offset=offset)

    def run_groups(
        self,
        run_id: str,
        *,
        step: int | None = None,
        service: str | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> R:
        """The groups scored for ``run_id`` (requests that carried it), oldest first, one page
        (``items``, ``limit``, ``offset``, ``total``); ``service`` keeps one service's groups.

        ::

            page = client.run_groups("run-7", step=3)
            [g["group_id"] for g in page["items"]], page["total"]
        """
        params = body({"step": step, "service": service, "limit": limit, "offset": offset}, {})
        path = f"/v1/runs/{quote(run_id, safe='')}/groups"
        return self._call(Call("GET", path, params=params))

    def runs(self, *, limit: int = 100, offset: int = 0) -> R:
        """The runs this key stored groups for (an admin key: every run), most recent first.

        ::

            client.runs()["items"][0]  # {"run_id", "groups", "first_step", "last_step", ...}
        """
        return self._call(Call("GET", "/v1/runs", params={"limit": limit, "offset": offset}))

    def health(self) -> R:
        """Liveness: ``{"status": "ok"}`` while the process answers."""
        return self._call(Call("GET", "/health/live"))

    def ready(self) -> R:
        """Readiness, not retried: the checks when ready, else :class:`BackendUnavailable`.

        ::

            client.ready()  # {"status": "ready", "checks": {"database": True, "cache": True}}
        """
        return self._call(Call("GET", "/health/ready", max_retries=0))

    def _post(self, path: str, payload: JSONObject, idempotency_key: str | None) -> R:
        return self._call(
            Call("POST", path, json=payload, idempotency_key=idempotency_key, answer=ANSWERS[path])
        )
