"""The audit trail of composite reward groups: stored per run, listed per run."""

from __future__ import annotations

from typing import Any

from plaudit_wire.schemas import ScoredGroupPage
from services.core.db.records import ScoredGroupRepository, group_out

SERVICE = "rewards"


class RewardGroups(ScoredGroupRepository):
    """The scored-groups table, seen through the rewards service's rows only.

    Example: ``await RewardGroups(resources.sessions).page("run-1", limit=10)``.
    """

    async def add(
        self,
        run_id: str,
        step: int | None,
        group_id: str | None,
        request_hash: str,
        result: Any,
        *,
        spec_name: str | None = None,
        spec_version: int | None = None,
        inputs: dict[str, Any] | None = None,
    ) -> str:
        """Store one scored group (with the named spec that scored it, and what it scored);
        returns its id."""
        [row_id] = await self.add_many(
            SERVICE,
            run_id,
            step,
            [(group_id, request_hash, result)],
            spec_name=spec_name,
            spec_version=spec_version,
            inputs=[inputs],
        )
        return row_id

    async def page(
        self, run_id: str, *, step: int | None = None, limit: int = 100, offset: int = 0
    ) -> ScoredGroupPage:
        """One page in scoring order (the older shape of the deprecated
        ``/v1/rewards/runs/{run_id}/groups``; ``GET /v1/runs/{run_id}/groups`` replaces it)."""
        rows, total = await self.list_for_run(
            run_id, step=step, service=SERVICE, limit=limit, offset=offset
        )
        next_offset = offset + limit if offset + limit < total else None
        return ScoredGroupPage(
            run_id=run_id, groups=[group_out(r) for r in rows], next_offset=next_offset
        )
