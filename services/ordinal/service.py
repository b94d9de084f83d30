"""The ordinal service: request groups -> levels -> vectorized advantages -> response."""

from __future__ import annotations

import anyio.to_thread
import numpy as np
import numpy.typing as npt

from plaudit_wire.ordinal import (
    AdvantagesRequest,
    AdvantagesResponse,
    DecomposeRequest,
    DecomposeResponse,
    GroupOut,
    ThresholdOut,
)
from services.core.db.records import ScoredGroupRepository, content_hash
from services.core.errors import InvalidInput
from services.ordinal import estimators
from services.ordinal.levels import check_bin_edges, integer_levels, resolve_k
from services.ordinal.settings import OrdinalSettings


class OrdinalService:
    """ODRPO and the scalar GRPO family over many groups per request."""

    def __init__(
        self,
        settings: OrdinalSettings,
        scored_groups: ScoredGroupRepository | None,
        *,
        offload_min_values: int = 100_000,
    ) -> None:
        self._settings = settings
        self._scored_groups = scored_groups
        self._offload_min_values = offload_min_values

    async def advantages(self, request: AdvantagesRequest) -> AdvantagesResponse:
        """Advantages per group; stored for the run when ``run_id`` is set.

        A large request is computed in a worker thread (issue 9: 10,000 groups held the event
        loop, and so every other request, for seconds).
        """
        values = sum(len(g.scores) for g in request.groups)
        if values >= self._offload_min_values:
            response = await anyio.to_thread.run_sync(self.compute, request)
        else:
            response = self.compute(request)
        await self._store(request, response)
        return response

    def compute(self, request: AdvantagesRequest) -> AdvantagesResponse:
        """The advantages of every group (pure computation; no storage)."""
        levels, ks = self._levels(request)
        scores, mask = _pad(levels)
        k = np.asarray(ks, dtype=np.int64)
        if request.estimator == "odrpo":
            weights = self._weights(request, k)
            adv, rates, active = estimators.odrpo_advantages(
                scores, mask, k, scaling=request.step_scaling, weights=weights, eps=request.eps
            )
            thresholds: list[list[ThresholdOut] | None] = [
                _thresholds(rates[i], active[i], ks[i]) for i in range(len(ks))
            ]
        else:
            adv = estimators.scalar_advantages(scores, mask, request.estimator, request.eps)
            thresholds = [None] * len(ks)
        # Values are computed here, not parsed: skip validation on the (large) response.
        groups = [
            GroupOut.model_construct(
                id=g.id if g.id is not None else f"g{i}",
                advantages=adv[i, : len(levels[i])].tolist(),
                levels=levels[i].tolist(),
                thresholds=thresholds[i],
            )
            for i, g in enumerate(request.groups)
        ]
        return AdvantagesResponse.model_construct(
            kind="advantages", estimator=request.estimator, groups=groups
        )

    def decompose(self, request: DecomposeRequest) -> DecomposeResponse:
        """The binary ladder b^k = [score >= k] for k = 2..K."""
        if request.bin_edges is not None:
            check_bin_edges(request.bin_edges)
        k = resolve_k(None, request.k, request.bin_edges)
        levels = integer_levels(request.scores, k, request.bin_edges, "scores")
        steps = estimators.ladder(levels.astype(np.float64), k).astype(int)
        return DecomposeResponse(
            k=k, thresholds=list(range(2, k + 1)), levels=levels.tolist(), indicators=steps.tolist()
        )

    def _levels(self, request: AdvantagesRequest) -> tuple[list[npt.NDArray[np.int64]], list[int]]:
        limits = self._settings
        if len(request.groups) > limits.max_groups:
            raise InvalidInput(
                f"{len(request.groups)} groups exceed the limit of {limits.max_groups} per request",
                param="groups",
            )
        if request.bin_edges is not None:
            check_bin_edges(request.bin_edges)
        levels, ks = [], []
        for i, group in enumerate(request.groups):
            if len(group.scores) > limits.max_group_size:
                raise InvalidInput(
                    f"a group of {len(group.scores)} exceeds the limit of {limits.max_group_size}",
                    param=f"groups[{i}].scores",
                )
            k = resolve_k(group.k, request.k, request.bin_edges)
            levels.append(integer_levels(group.scores, k, request.bin_edges, f"groups[{i}].scores"))
            ks.append(k)
        return levels, ks

    @staticmethod
    def _weights(
        request: AdvantagesRequest, k: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.float64] | None:
        k_max = int(k.max())
        if request.threshold_weights is not None:
            given = np.asarray(request.threshold_weights, dtype=np.float64)
            if not np.all(k == len(given) + 1):
                raise InvalidInput(
                    f"threshold_weights has {len(given)} entries; every group needs K-1 of them "
                    f"(K={sorted(set(k.tolist()))})",
                    param="threshold_weights",
                )
            weights = np.broadcast_to(given, (len(k), k_max - 1)).copy()
        elif request.normalize_thresholds:
            weights = np.ones((len(k), k_max - 1))
        else:
            return None
        if request.normalize_thresholds:
            weights = weights / (k[:, None] - 1)
        return weights

    async def _store(self, request: AdvantagesRequest, response: AdvantagesResponse) -> None:
        if request.run_id is None or self._scored_groups is None:
            return
        rows = [
            (
                out.id,
                content_hash(group.model_dump()),
                {"estimator": response.estimator, **out.model_dump()},
            )
            for group, out in zip(request.groups, response.groups, strict=True)
        ]
        await self._scored_groups.add_many("ordinal", request.run_id, request.step, rows)


def _pad(
    levels: list[npt.NDArray[np.int64]],
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
    width = max(len(x) for x in levels)
    scores = np.zeros((len(levels), width), dtype=np.float64)
    mask = np.zeros((len(levels), width), dtype=bool)
    for i, row in enumerate(levels):
        scores[i, : len(row)] = row
        mask[i, : len(row)] = True
    return scores, mask


def _thresholds(
    rates: npt.NDArray[np.float64], active: npt.NDArray[np.bool_], k: int
) -> list[ThresholdOut]:
    return [
        ThresholdOut(k=j + 2, pass_rate=r, active=a)
        for j, (r, a) in enumerate(
            zip(rates[: k - 1].tolist(), active[: k - 1].tolist(), strict=True)
        )
    ]
