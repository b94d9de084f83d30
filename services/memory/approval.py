"""An admin's decision on a held revision: approve it (applied as the revision job applies) or
dismiss it.

The oscillation guard holds a revision whose edit undoes a recent one or flips too many frozen
verdicts; nothing is applied until an admin decides. Each decision starts with a
compare-and-set on the revision row's state (``held`` -> ``approving``, or ``held`` ->
``rejected``), so two admins acting on one revision at once act once: the other gets 409 with
the state the first left. An approval then applies through :meth:`Reviser.publish` with the
rubric's ``expected_version`` = the revision's ``from_version`` (a second guard: a rubric can
move from that version once), and goes back to ``held`` when the rubric has moved on or the
apply fails. A claim left in ``approving`` by a process that died mid-approval may be taken
over after :data:`CLAIM_TIMEOUT`, so the admin is never locked out of it.
"""

from __future__ import annotations

import copy
import logging
from datetime import timedelta
from typing import Any

from services.core.context import current_principal
from services.core.db.tables import utcnow
from services.core.errors import Conflict, NotFound
from services.memory.models import MemoryRevision
from services.memory.operations import accepted_from_wire
from services.memory.repository import MemoryRepository
from services.memory.revision import Reviser
from services.memory.views import iso
from services.rubrics.service import RubricsService

log = logging.getLogger(__name__)

HELD = "held"
APPROVING = "approving"
#: An approval takes well under a second; a claim older than this was left by a dead process.
CLAIM_TIMEOUT = timedelta(minutes=5)


class Approvals:
    """``approve`` and ``dismiss`` of held revisions (admin routes)."""

    def __init__(
        self, repository: MemoryRepository, rubrics: RubricsService, reviser: Reviser
    ) -> None:
        self._repo = repository
        self._rubrics = rubrics
        self._reviser = reviser

    async def approve(self, revision_id: str) -> MemoryRevision:
        """Apply a held revision's accepted operations; the row ends ``applied``."""
        revision = await self._found(revision_id)
        await self._take(revision, state=APPROVING)
        try:
            await self._apply(revision)
        except BaseException:
            await self._repo.swap_revision(revision.id, APPROVING, state=HELD)
            raise
        return await self._found(revision_id)

    async def dismiss(self, revision_id: str) -> MemoryRevision:
        """A held revision becomes ``rejected``, saying which admin dismissed it and when."""
        revision = await self._found(revision_id)
        decision = _decision(revision)
        reason = f"dismissed by an admin ({_who(decision['by'])})"
        detail = {**revision.detail, "dismissed": decision}
        await self._take(revision, state="rejected", reason=reason, detail=detail)
        return await self._found(revision_id)

    async def _apply(self, revision: MemoryRevision) -> None:
        rubric = await self._rubrics.get(revision.rubric_id)
        if rubric.version != revision.from_version:
            raise _moved_on(revision, rubric.version)
        operations = copy.deepcopy(revision.operations)
        base = {
            "from_version": revision.from_version,
            "rationale": revision.rationale,
            "evidence": list(revision.evidence),
        }
        decision = _decision(revision)
        try:
            record = await self._reviser.publish(
                revision,
                rubric,
                accepted_from_wire(operations),
                operations,
                base,
                extra={"approved": decision},
            )
        except Conflict:  # moved between our read and the compare-and-set
            current = await self._rubrics.get(revision.rubric_id)
            raise _moved_on(revision, current.version) from None
        detail = {**revision.detail, "record_id": record.id, "approved": decision}
        # Unconditional: the version exists now, so the row must say so.
        await self._repo.set_revision(
            revision.id,
            state="applied",
            to_version=record.data["to_version"],
            operations=operations,
            reason=None,
            detail=detail,
        )

    async def _found(self, revision_id: str) -> MemoryRevision:
        revision = await self._repo.revision(revision_id)
        if revision is None:
            raise NotFound(f"unknown revision {revision_id!r}", param="revision_id")
        return revision

    async def _take(self, revision: MemoryRevision, **values: Any) -> None:
        """Move the row out of ``held`` (or a stale approval claim); 409 when another decision
        got there first."""
        if await self._repo.swap_revision(revision.id, HELD, **values):
            return
        stale = utcnow() - CLAIM_TIMEOUT
        if await self._repo.swap_revision(revision.id, APPROVING, stale_before=stale, **values):
            log.warning("revision %s: took over an approval left unfinished", revision.id)
            return
        now = await self._found(revision.id)
        busy = " (an approval is in progress)" if now.state == APPROVING else ""
        raise Conflict(
            f"revision {revision.id} is {now.state}{busy}, not held: only a held revision can "
            "be approved or dismissed",
            param="revision_id",
        )


def _decision(revision: MemoryRevision) -> dict[str, Any]:
    """Who decided and when (``by``: the admin key's owner id, null without API keys), and
    why the guard had held the revision."""
    return {"by": current_principal().owner, "at": iso(utcnow()), "held_because": revision.reason}


def _who(owner: str | None) -> str:
    return f"key {owner}" if owner else "no API keys configured"


def _moved_on(revision: MemoryRevision, current: int) -> Conflict:
    return Conflict(
        f"rubric {revision.rubric_id} is at version {current} now, not version "
        f"{revision.from_version} this revision was proposed on: look at version {current} "
        "(and the run's newer revisions) before deciding; nothing was applied",
    )
