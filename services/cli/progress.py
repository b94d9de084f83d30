"""Progress on the terminal: a bar redrawn in place on a TTY; elsewhere (CI, ``nohup``, a
pipe) a line at most every ``every_s`` seconds, on each new stage, and at the end, with the
elapsed time and an estimate of what is left of the stage (from the stage's own pace: a
command's earlier stages, a model load say, say nothing about how fast this one goes)."""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator
from typing import TextIO

BAR_WIDTH = 30


class ProgressDisplay:
    """Shows ``done`` of ``total`` (None: unknown) for a named stage.

    ::

        display = ProgressDisplay()
        display.update(12, 40, "judging votes")
        display.close()
    """

    def __init__(
        self,
        stream: TextIO | None = None,
        *,
        every_s: float = 30.0,
        tty: bool | None = None,
    ) -> None:
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.every_s = every_s
        self.started = self.last = self.stage_started = time.monotonic()
        self.done, self.stage, self.stage_done = 0, "", 0
        self.total: int | None = None
        self._drawn = False

    def update(self, done: int, total: int | None, stage: str) -> None:
        new_stage = stage != self.stage
        if new_stage:  # the pace is measured from here, over the items done from here
            self.stage_started, self.stage_done = time.monotonic(), done
        self.done, self.total, self.stage = done, total, stage
        if self.tty:
            self._draw()
        elif new_stage or time.monotonic() - self.last >= self.every_s:
            self.line()

    def __call__(self, done: int, total: int | None, stage: str) -> None:
        """The display as a progress callback (``progress=display``)."""
        self.update(done, total, stage)

    async def async_update(self, done: int, total: int | None, stage: str) -> None:
        """The display as an async progress callback (synthesis run in this process)."""
        self.update(done, total, stage)

    def close(self) -> None:
        """End the bar's line, or print the last progress line."""
        if self.tty:
            if self._drawn:
                self.stream.write("\n")
                self.stream.flush()
        else:
            self.line()

    def line(self) -> None:
        self.last = time.monotonic()
        elapsed = self.last - self.started
        total = "?" if self.total is None else str(self.total)
        self.stream.write(
            f"{self.stage}: {self.done}/{total}, {elapsed:.0f} s elapsed, "
            f"~{self._left(self.last)} s left\n"
        )
        self.stream.flush()

    def _draw(self) -> None:
        now = time.monotonic()
        elapsed = now - self.started
        if self.total:
            filled = min(BAR_WIDTH, BAR_WIDTH * self.done // self.total)
            bar = "#" * filled + "-" * (BAR_WIDTH - filled)
            shown = f"[{bar}] {self.done}/{self.total} {100 * self.done / self.total:3.0f}%"
        else:
            shown = f"{self.done}/?"
        left = self._left(now)
        self.stream.write(f"\r{self.stage:24.24} {shown}  {elapsed:.0f} s, ~{left} s left\x1b[K")
        self.stream.flush()
        self._drawn = True

    def _left(self, now: float) -> str:
        """Seconds left at the stage's pace so far, or ``?`` before it has one."""
        if self.total is None:
            return "?"
        remaining = max(0, self.total - self.done)
        if remaining == 0:
            return "0"
        done_here = self.done - self.stage_done
        if done_here <= 0:
            return "?"
        return f"{(now - self.stage_started) / done_here * remaining:.0f}"


@contextlib.contextmanager
def progress_display(*, every_s: float = 10.0) -> Iterator[ProgressDisplay]:
    """A display for one command's long work, closed (its last line written) at the end."""
    display = ProgressDisplay(every_s=every_s)
    try:
        yield display
    finally:
        display.close()
