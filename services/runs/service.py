"""The runs listing: every run that stored scored groups, and each run's groups."""

from __future__ import annotations

from plaudit_wire.runs import RunSummary, SpecUse
from plaudit_wire.schemas import Page, ScoredGroupOut
from services.core.db.records import ScoredGroupRepository, group_out
from services.core.db.tables import utc_iso


class RunsService:
    """Reads the scored-groups table per run; a caller sees its own runs (an admin, all).

    Example: ``page = await RunsService(repository).runs(limit=10)``.
    """

    def __init__(self, groups: ScoredGroupRepository) -> None:
        self._groups = groups

    async def runs(self, *, limit: int, offset: int) -> Page[RunSummary]:
        rows, total = await self._groups.runs(limit=limit, offset=offset)
        items = [
            RunSummary(
                run_id=row.run_id,
                groups=row.groups,
                first_step=row.first_step,
                last_step=row.last_step,
                first_at=utc_iso(row.first_at),
                last_at=utc_iso(row.last_at),
                services=row.services,
                specs=[SpecUse(**use) for use in await self._groups.run_specs(row.run_id)],
            )
            for row in rows
        ]
        return Page(items=items, limit=limit, offset=offset, total=total)

    async def groups(
        self,
        run_id: str,
        *,
        step: int | None,
        service: str | None,
        limit: int,
        offset: int,
    ) -> Page[ScoredGroupOut]:
        rows, total = await self._groups.list_for_run(
            run_id, step=step, service=service, limit=limit, offset=offset
        )
        return Page(items=[group_out(r) for r in rows], limit=limit, offset=offset, total=total)
