"""The groups a process is scoring right now, so a straggler waits for its group's values.

A straggler (a sample that reaches its deadline alone) takes its group's channel means when the
group was scored before it. Without this, one whose deadline passed while its group was still
being scored took the channels' midpoints instead: its neutral value depended on timing (issue
22). Now it waits for the group's scoring to end, then takes the means (or the midpoints, when
that scoring failed).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Hashable, Iterator


class GroupsInFlight:
    """Scorings under way, by group key (several may share a key: a group split in parts)."""

    def __init__(self) -> None:
        self._running: dict[Hashable, list[asyncio.Event]] = {}

    @contextlib.contextmanager
    def scoring(self, key: Hashable) -> Iterator[None]:
        """Mark ``key`` as being scored for the block's duration."""
        done = asyncio.Event()
        self._running.setdefault(key, []).append(done)
        try:
            yield
        finally:
            done.set()
            running = self._running.get(key, [])
            if done in running:
                running.remove(done)
            if not running:
                self._running.pop(key, None)

    async def wait(self, key: Hashable) -> bool:
        """Wait until every scoring of ``key`` under way now has ended; True if there was one."""
        running = list(self._running.get(key, ()))
        for done in running:
            await done.wait()
        return bool(running)
