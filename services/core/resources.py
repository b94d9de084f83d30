"""The shared collaborators of a Plaudit process, built in the app's lifespan.

Tests pass ready-made collaborators (an embedder, a cache) as keyword arguments; anything not
passed is built from settings.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from judges.lifecycle import Lifecycle
from services.core.cache import Cache, make_cache
from services.core.channels import ChannelRegistry
from services.core.components import ServiceRegistry
from services.core.db import engine as db
from services.core.db.records import ScoredGroupRepository
from services.core.heap import freeze_startup_objects
from services.core.jobs.context import JobRegistry
from services.core.jobs.queues import JobQueue, make_job_queue
from services.core.jobs.store import JobStore
from services.core.metrics import Metrics
from services.core.models.embedder import BatchedEmbedder, Embedder
from services.core.settings import CoreSettings
from services.core.store.artifacts import ArtifactStore
from services.core.web.idempotency import IdempotencyStore

log = logging.getLogger(__name__)


@dataclass
class Resources:
    settings: CoreSettings
    metrics: Metrics
    engine: AsyncEngine
    sessions: async_sessionmaker[AsyncSession]
    cache: Cache
    jobs: JobQueue
    job_registry: JobRegistry
    scored_groups: ScoredGroupRepository
    idempotency: IdempotencyStore
    artifacts: ArtifactStore
    embedder: BatchedEmbedder | None = None
    extras: dict[str, Any] = field(default_factory=dict)
    services: ServiceRegistry = field(default_factory=ServiceRegistry)
    channels: ChannelRegistry = field(default_factory=ChannelRegistry)
    checks: dict[str, Callable[[], bool]] = field(default_factory=dict)
    closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    loaders: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    models: dict[str, Lifecycle] = field(default_factory=dict)
    _loading: asyncio.Task[None] | None = None
    _background: list[asyncio.Task[None]] = field(default_factory=list)

    def manage(self, name: str, model: Lifecycle, *, close: bool = True) -> None:
        """Start ``model`` in the background with the others, report its readiness under
        ``name``, and close it at shutdown (unless ``close`` is False: the caller owns it)."""
        self.models[name] = model
        self.loaders.append(model.start)
        if close:
            self.closers.append(model.aclose)

    async def loaded(self) -> None:
        """Wait until every model has finished loading (or failed to; see the log)."""
        if self._loading is not None:
            await asyncio.shield(self._loading)

    def start_loading(self) -> None:
        """Load every model in the background, one after the other.

        One at a time on purpose: two threads importing transformers at once can see a
        half-initialised module, and two loads would only compete for the same cores.
        """
        self._loading = asyncio.create_task(self._load_all())

    def start_maintenance(self) -> None:
        """Periodic housekeeping: expired idempotency records are deleted."""
        self._background.append(asyncio.create_task(self.idempotency.purge_forever()))

    async def _load_all(self) -> None:
        for load in self.loaders:
            try:
                await load()
            except Exception:
                log.exception("a model failed to load")
        freeze_startup_objects("start-up and model loading")  # once, with the models

    async def readiness(self) -> dict[str, bool]:
        """Each check that /health/ready reports."""
        checks = {"database": await db.ping(self.engine), "cache": await self.cache.ping()}
        for name, model in self.models.items():
            checks[name] = model.readiness.ready
        for name, check in self.checks.items():
            checks[name] = check()
        return checks

    def not_ready_reasons(self) -> dict[str, str]:
        """Why each model that is not ready is not (``loading``, ``failed: <error>``)."""
        return {
            name: model.readiness.describe()
            for name, model in self.models.items()
            if not model.readiness.ready
        }

    async def aclose(self) -> None:
        if self._loading is not None and not self._loading.done():
            self._loading.cancel()
            await asyncio.gather(self._loading, return_exceptions=True)
        for task in self._background:
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        for close in reversed(self.closers):
            await close()
        await self.jobs.close()
        await self.cache.close()
        await self.engine.dispose()


async def open_resources(
    settings: CoreSettings,
    metrics: Metrics,
    *,
    needs_embedder: bool,
    embedder: Embedder | None = None,
    cache: Cache | None = None,
    job_registry: JobRegistry | None = None,
    extras: dict[str, Any] | None = None,
) -> Resources:
    """Connect to the database (migrating it when allowed), the cache and the job queue."""
    url = settings.resolved_database_url
    if settings.auto_migrate:
        log.info("migrating %s", make_url(url).render_as_string(hide_password=True))
        await db.upgrade_async(url)
    engine = db.make_engine(url)
    sessions = db.make_sessionmaker(engine)
    registry = job_registry or JobRegistry()
    # Started by the caller once the components registered their job functions, since the
    # first sweep may resume a dead process's job (issue 23).
    jobs = await make_job_queue(JobStore(sessions), registry, settings.jobs, settings.redis_url)
    resources = Resources(
        settings=settings,
        metrics=metrics,
        engine=engine,
        sessions=sessions,
        cache=cache or make_cache(settings.redis_url),
        jobs=jobs,
        job_registry=registry,
        scored_groups=ScoredGroupRepository(sessions),
        artifacts=ArtifactStore(sessions, settings.data_dir),
        idempotency=IdempotencyStore(sessions, settings.idempotency, metrics=metrics),
        extras=dict(extras or {}),
    )
    if needs_embedder:
        resources.embedder = BatchedEmbedder(
            embedder,
            model=settings.embedder.model,
            device=settings.embedder.device,
            batch_size=settings.embedder.batch_size,
            max_items=settings.embedder.max_items,
            max_wait=settings.embedder.max_wait_ms / 1000,
            metrics=metrics,
        )
        resources.manage("embedder", resources.embedder)
    return resources
