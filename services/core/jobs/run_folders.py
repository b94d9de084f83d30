"""A job's run folder under the data directory, and the trainer checkpoints kept in it.

A training job (``karma.train``, ``simulator.calibrate``) works in a folder of its own; the
trainer (transformers' ``Trainer``) writes resumable ``checkpoint-<step>`` folders into a
subfolder, so a retry of the job after its process died resumes from the last one (issue 23).
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from pathlib import Path

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
