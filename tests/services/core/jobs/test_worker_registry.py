"""``plaudit worker`` runs every kind of job the API can start: with Redis, a job no worker
registered would stay queued for ever (rubric synthesis and simulator calibrations once did).
The worker builds the components of ``services/app.py`` that declare jobs (issue 20: one list)."""

from __future__ import annotations

from pathlib import Path

from services.app import components, create_app
from services.core.web.app_factory import build_app
from services.jobs.worker import job_components
from services.settings import Settings
from tests.judges.scripted_backend import ScriptedBackend


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
    declared = {kind for component in components() for kind in component.jobs}
    assert {"rubrics.synthesize", "simulator.calibrate", "karma.train", "runs.rescore"} <= served
    assert served == declared
    assert await _registered(worker, settings) == served
