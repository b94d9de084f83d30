"""The diversity service: embed a group's completions once, score each against the group."""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from plaudit_wire.diversity import (
    CompletionDiversity,
    DiversityBatchRequest,
    DiversityBatchResponse,
    DiversityOptions,
    DiversityRequest,
    DiversityResponse,
    GroupCompletions,
    GroupStats,
)
from plaudit_wire.schemas import CompletionItem, completion_ids
from services.core.db.records import ScoredGroupRepository, content_hash
from services.core.errors import InvalidInput
from services.diversity import metrics
from services.diversity.settings import DiversitySettings


class AsyncEmbedder(Protocol):
    @property
    def model_id(self) -> str: ...

    async def embed(self, texts: list[str]) -> metrics.Matrix: ...


class DiversityService:
    """Per-completion diversity rewards and group statistics."""

    def __init__(
        self,
        settings: DiversitySettings,
        embedder: AsyncEmbedder,
        scored_groups: ScoredGroupRepository | None = None,
    ) -> None:
        self._settings = settings
        self._embedder = embedder
        self._scored_groups = scored_groups

    async def score_group(self, request: DiversityRequest) -> DiversityResponse:
        """Diversity rewards for one group, stored for the request's run."""
        group = GroupCompletions(id=request.id, completions=request.completions)
        response = await self.score_completions(group, request)
        await self._store(request, [group], [response])
        return response

    async def score_completions(
        self, group: GroupCompletions, options: DiversityOptions
    ) -> DiversityResponse:
        """The port the router and the ``diversity`` channel share: one group's rewards,
        nothing stored."""
        self._check_group(group, "completions")
        embeddings = await self._embed([c.text for c in group.completions])
        return self._score(group, embeddings, options)

    async def score_groups(self, request: DiversityBatchRequest) -> DiversityBatchResponse:
        """Many groups, embedded in one call, each scored within itself."""
        if len(request.groups) > self._settings.max_groups:
            raise InvalidInput(
                f"{len(request.groups)} groups exceed the limit of "
                f"{self._settings.max_groups} per request",
                param="groups",
            )
        for i, group in enumerate(request.groups):
            self._check_group(group, f"groups[{i}].completions")
        texts = [c.text for g in request.groups for c in g.completions]
        embeddings = await self._embed(texts)
        out, start = [], 0
        for group in request.groups:
            end = start + len(group.completions)
            out.append(self._score(group, embeddings[start:end], request))
            start = end
        await self._store(request, request.groups, out)
        return DiversityBatchResponse(groups=out)

    async def _embed(self, texts: list[str]) -> metrics.Matrix:
        """Embed each distinct text once, so identical completions get identical vectors."""
        unique = list(dict.fromkeys(texts))
        vectors = await self._embedder.embed(unique)
        row = {text: i for i, text in enumerate(unique)}
        return vectors[[row[t] for t in texts]]

    def _check_group(self, group: GroupCompletions, param: str) -> None:
        limit = self._settings.max_completions
        if len(group.completions) > limit:
            raise InvalidInput(
                f"{len(group.completions)} completions exceed the limit of {limit} per group",
                param=param,
            )
        _check_texts(group.completions, self._settings.max_text_chars, param)

    def _score(
        self, group: GroupCompletions, embeddings: metrics.Matrix, options: DiversityOptions
    ) -> DiversityResponse:
        texts = [c.text for c in group.completions]
        raw = metrics.raw_diversity(embeddings, options.metric)
        rewards = options.weight * metrics.scale(raw, options.scaling, options.min_range)
        pairwise = metrics.cosine_distance_matrix(embeddings)
        ids = completion_ids(group.completions)
        return DiversityResponse(
            id=group.id,
            metric=options.metric,
            scaling=options.scaling,
            embedder=self._embedder.model_id,
            rewards=rewards.tolist(),
            results=[
                CompletionDiversity(id=i, reward=float(r), distance=float(d))
                for i, r, d in zip(ids, rewards, raw, strict=True)
            ],
            stats=GroupStats(
                mean_pairwise_cosine_distance=metrics.mean_pairwise_cosine_distance(pairwise),
                distinct_1=metrics.distinct_n(texts, 1),
                distinct_2=metrics.distinct_n(texts, 2),
                distance_min=float(np.min(raw)),
                distance_max=float(np.max(raw)),
            ),
            **_separability(raw, options, len(texts)),
        )

    async def _store(
        self,
        request: DiversityRequest | DiversityBatchRequest,
        groups: list[GroupCompletions],
        responses: list[DiversityResponse],
    ) -> None:
        if request.run_id is None or self._scored_groups is None:
            return
        rows = [
            (g.id, content_hash(g.model_dump()), r.model_dump())
            for g, r in zip(groups, responses, strict=True)
        ]
        await self._scored_groups.add_many("diversity", request.run_id, request.step, rows)


def _check_texts(items: list[CompletionItem], max_chars: int, param: str) -> None:
    for j, item in enumerate(items):
        if len(item.text) > max_chars:
            raise InvalidInput(
                f"completion of {len(item.text)} characters exceeds the limit of {max_chars}",
                param=f"{param}[{j}].text",
            )


def _separability(raw: metrics.Vector, options: DiversityOptions, size: int) -> dict[str, Any]:
    """Whether min-max scaling told the group apart, and why not (never silent zeros)."""
    if options.scaling != "minmax":
        return {}
    spread = float(np.max(raw) - np.min(raw))
    if spread >= max(options.min_range, 1e-12):
        return {}
    if size == 2 and options.metric == "centroid":
        why = (
            "2 completions are equally far from their centroid, so min-max scaling gives both 0: "
            "use metric pairwise_cosine with scaling none, or larger groups"
        )
    else:
        why = (
            f"the completions' distances differ by {spread:.2g}, less than min_range "
            f"({options.min_range:g}): min-max scaling gives every completion 0"
        )
    return {"separable": False, "note": why}
