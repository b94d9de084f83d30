"""Calibrating the simulator as a job (``simulator.calibrate``), stored as a version.

``POST /v1/simulator/calibrations`` checks the request at once (:func:`check_request`: data
the server cannot read is a 422 before any job starts) and queues the job; the job runs
:func:`services.simulator.calibration.calibrate` in a thread, reports its stages through the
job's progress (``loading``, ``train`` step by step, ``satisfaction``, ``measuring before``,
``measuring after``, ``saving``), stores the calibration folder with its realism figures and
answers them.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from judges.backends.settings import resolve_role
from plaudit_wire.simulator import CalibrationRequest
from services.core.jobs.context import JobContext, JobFunction, JobRegistry
from services.core.jobs.run_folders import CHECKPOINTS, run_folder
from services.core.jobs.thread_progress import ThreadProgress, keeping_torch_threads
from services.core.settings import CoreSettings
from services.datasets.store import dataset_folder
from services.judge.settings import JudgeSettings
from services.simulator.data import resolve_source
from services.simulator.service import SimulatorService, headline
from services.simulator.settings import SimulatorSettings

CALIBRATE = "simulator.calibrate"


def uss_dir(settings: CoreSettings) -> Path:
    """The USS dialogues folder: PLAUDIT_SIMULATOR_DATA_DIR, else the fetched uss dataset."""
    return dataset_folder(settings, "uss", SimulatorSettings.of(settings).data_dir)


async def check_request(request: CalibrationRequest, settings: CoreSettings) -> None:
    """Refuse at once data the job could not read."""
    for source in request.data:
        resolve_source(source, uss_dir(settings), SimulatorSettings.of(settings).data_roots)


def base_model_dir(settings: CoreSettings) -> Path:
    """The chat model a calibration adapts (the simulator's local model, default SmolLM2)."""
    from judges.backends.convert import resolve_model_dir

    own = resolve_role(SimulatorSettings.of(settings).llm, JudgeSettings.of(settings))
    model = own.model if own is not None and own.backend == "local" else None
    return resolve_model_dir(model, settings.models_dir)


def calibrate_job(service: SimulatorService, settings: CoreSettings) -> JobFunction:
    async def run(ctx: JobContext, params: dict[str, Any]) -> dict[str, Any]:
        from services.simulator.calibration import calibrate

        request = CalibrationRequest.model_validate(params)
        loop = asyncio.get_running_loop()
        embedder = service.embedder

        def embed(texts: list[str]) -> npt.NDArray[np.float32]:
            if embedder is None:
                raise RuntimeError("calibration needs the embedder")
            future = asyncio.run_coroutine_threadsafe(embedder.embed(texts), loop)
            return np.asarray(future.result(), dtype=np.float32)

        # A retry keeps the LoRA trainer's checkpoints of the attempt that died (issue 23).
        async with run_folder(ctx, settings.data_dir / "simulator" / "runs" / ctx.job_id) as work:
            await ctx.progress(0, 1, "loading")
            base = await asyncio.to_thread(base_model_dir, settings)
            result = await asyncio.to_thread(
                keeping_torch_threads(calibrate),
                request.config(),
                base_dir=base,
                data_dir=uss_dir(settings),
                roots=SimulatorSettings.of(settings).data_roots,
                out=work / "calibration",
                embed=embed,
                progress=ThreadProgress(ctx, loop),
                checkpoints=work / CHECKPOINTS,
            )
            await ctx.progress(0, 1, "saving")
            version = await service.save(
                result.path,
                result.metrics,
                request.name,
                owner=ctx.owner,
                job_id=ctx.job_id,
                note=request.note,
            )
            await ctx.progress(1, 1, "saving")
        return {
            "calibration": {"name": version.name, "version": version.version, "ref": version.ref},
            "summary": headline(result.metrics),
            "realism": result.metrics["realism"],
            "training": result.metrics["training"],
            "data": result.metrics["data"],
            "params": result.metrics["params"],
        }

    return run


def register(registry: JobRegistry, service: SimulatorService, settings: CoreSettings) -> None:
    registry.register(CALIBRATE, calibrate_job(service, settings))
