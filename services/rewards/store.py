"""The audit trail of composite reward groups: stored per run, listed per run."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from services.core.models import ScoredGroup
from services.core.records import ScoredGroupRepository
from services.core.schemas import ScoredGroupOut, ScoredGroupPage

SERVICE = "rewards"


class RewardGroups(ScoredGroupRepository):
    """The scored-groups table, seen through the rewards service's rows only.

    Example: ``await RewardGroups(resources.sessions).page("run-1", limit=10)``.
    """

    async def add(
        self, run_id: str, step: int | None, group_id: str | None, request_hash: str, result: Any
    ) -> str:
        """Store one scored group; returns its id."""
        [row_id] = await self.add_many(SERVICE, run_id, step, [(group_id, request_hash, result)])
        return row_id

    async def page(
        self, run_id: str, *, step: int | None = None, limit: int = 100, offset: int = 0
    ) -> ScoredGroupPage:
        """One page in scoring order, shaped like ``GET /v1/runs/{run_id}/groups``."""
        query = select(ScoredGroup).where(
            ScoredGroup.run_id == run_id, ScoredGroup.service == SERVICE
        )
        if step is not None:
            query = query.where(ScoredGroup.step == step)
        query = query.order_by(ScoredGroup.created_at, ScoredGroup.id)
        async with self._sessions() as session:
            rows = list((await session.scalars(query.limit(limit + 1).offset(offset))).all())
        groups = [_out(row) for row in rows[:limit]]
        next_offset = offset + limit if len(rows) > limit else None
        return ScoredGroupPage(run_id=run_id, groups=groups, next_offset=next_offset)


def _out(row: ScoredGroup) -> ScoredGroupOut:
    return ScoredGroupOut(
        id=row.id,
        run_id=row.run_id,
        step=row.step,
        service=row.service,
        group_id=row.group_id,
        request_hash=row.request_hash,
        result=row.result,
        created_at=row.created_at.isoformat(),
    )
