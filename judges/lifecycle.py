"""The lifecycle every model-backed component shares: start, readiness, close.

A process starts each component once (in the app's lifespan, in the background), asks it
whether it is ready (and if not, why) for ``/health/ready``, and closes it at shutdown.
Judge backends (:class:`~judges.backends.base.JudgeBackend`), the embedder and every
:class:`~judges.model_worker.ModelWorker` implement :class:`Lifecycle`.

Example::

    component: Lifecycle = ...
    await component.start()            # idempotent; raises if the model cannot load
    if not component.readiness.ready:
        print(component.readiness.state, component.readiness.reason)
    await component.aclose()
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

State = Literal["idle", "loading", "ready", "failed", "closed"]
"""``idle``: not started yet; ``loading``: start in progress; ``ready``: serving;
``failed``: the last start failed (``reason`` says why); ``closed``: shut down."""


@dataclass(frozen=True, slots=True)
class Readiness:
    """Whether a component can serve now, and the reason when it cannot."""

    state: State
    reason: str | None = None

    @property
    def ready(self) -> bool:
        """True when the component serves requests."""
        return self.state == "ready"

    def describe(self) -> str:
        """``"ready"``, ``"loading"`` or ``"failed: <reason>"``, for health messages."""
        return f"{self.state}: {self.reason}" if self.reason else self.state


READY = Readiness("ready")


class ModelUnavailable(RuntimeError):
    """A model cannot serve: it is still loading, its load failed, or it was closed."""

    def __init__(self, readiness: Readiness, message: str | None = None) -> None:
        super().__init__(message or f"the model is not available ({readiness.describe()})")
        self.readiness = readiness


@runtime_checkable
class Lifecycle(Protocol):
    """Something a process starts, asks about and closes."""

    async def start(self) -> None:
        """Load or connect; idempotent. Raises when that fails (readiness keeps the reason)."""
        ...

    @property
    def readiness(self) -> Readiness:
        """Whether it serves now, and why not when it does not."""
        ...

    async def aclose(self) -> None:
        """Release the model, threads and connections; idempotent."""
        ...
