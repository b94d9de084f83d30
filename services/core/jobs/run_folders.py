"""A job's run folder under the data directory, and the trainer checkpoints kept in it.

A training job (``karma.train``, ``simulator.calibrate``) works in a folder of its own; the
trainer (transformers' ``Trainer``) writes resumable ``checkpoint-<step>`` folders into a
subfolder, so a retry of the job after its process died resumes from the last one (issue 23).
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from services.core.jobs.context import JobContext

#: The trainer's checkpoints inside a job's run folder.
CHECKPOINTS = "trainer"


def clear_run_folder(work: Path, *, keep_checkpoints: bool) -> None:
    """Empty a job's run folder; with ``keep_checkpoints`` (a retry), keep the trainer's."""
    if not keep_checkpoints:
        shutil.rmtree(work, ignore_errors=True)
        return
    for child in work.iterdir() if work.is_dir() else []:
        if child.name == CHECKPOINTS:
            continue
        if child.is_dir():
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink()


@contextlib.asynccontextmanager
async def run_folder(ctx: JobContext, work: Path) -> AsyncIterator[Path]:
    """A training job's run folder, emptied as the job starts (a retry keeps the trainer's
    checkpoints of the attempt that died, issue 23) and removed when the job ends, fails or is
    cancelled; a process that is stopping leaves it, so the job's retry resumes from it."""
    await asyncio.to_thread(clear_run_folder, work, keep_checkpoints=ctx.attempt > 1)
    try:
        yield work
    except asyncio.CancelledError:
        if ctx.cancel_requested:  # else the process is stopping: a retry resumes
            await asyncio.shield(asyncio.to_thread(shutil.rmtree, work, True))
        raise
    except BaseException:
        await asyncio.to_thread(shutil.rmtree, work, True)
        raise
    await asyncio.to_thread(shutil.rmtree, work, True)


def last_checkpoint(folder: Path | None) -> Path | None:
    """The trainer's latest ``checkpoint-<step>`` folder in ``folder``, if any."""
    if folder is None or not folder.is_dir():
        return None
    steps = [
        (int(p.name.rsplit("-", 1)[1]), p)
        for p in folder.glob("checkpoint-*")
        if p.is_dir() and p.name.rsplit("-", 1)[1].isdigit()
    ]
    return max(steps)[1] if steps else None


def trainer_output(kept: Path | None, prefix: str) -> contextlib.AbstractContextManager[str]:
    """The folder a trainer writes into: ``kept`` (a job's checkpoints, left for a retry), or
    a temporary folder removed afterwards (a run outside a job)."""
    if kept:
        return contextlib.nullcontext(str(kept))
    return tempfile.TemporaryDirectory(prefix=prefix)
