"""``plaudit worker`` runs every kind of job the API can start: with Redis, a job no worker
registered would stay queued for ever (rubric synthesis and simulator calibrations once did)."""

from __future__ import annotations

from pathlib import Path

from judges.backends.scripted import ScriptedBackend
from services.app import create_app
from services.core.app_factory import build_app
from services.core.settings import Settings
from services.jobs.registry import job_components


async def _registered(app_factory: object, settings: Settings) -> set[str]:
    app = app_factory(settings)  # type: ignore[operator]
    async with app.router.lifespan_context(app):
        return set(app.state.resources.job_registry.functions)


async def test_the_worker_registers_every_job_the_api_can_start(
    tmp_path: Path, embedder: object
) -> None:
    settings = Settings(data_dir=tmp_path / "data", _env_file=None)  # type: ignore[call-arg]

    def everything(s: Settings) -> object:
        return create_app(s, embedder=embedder, judge_backend=ScriptedBackend())

    def worker(s: Settings) -> object:
        return build_app(
            job_components(), s, title="worker", embedder=embedder, judge_backend=ScriptedBackend()
        )

    served = await _registered(everything, settings)
    assert {"rubrics.synthesize", "simulator.calibrate", "karma.train"} <= served
    assert await _registered(worker, settings) == served
