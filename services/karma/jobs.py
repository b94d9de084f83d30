"""Training a KARMA model as a job (``karma.train``), saved as a version in the artifact store.

``POST /v1/karma/train`` checks the request at once (:func:`check_request`: data it cannot
read is a 422 before any job starts) and queues the job; the job runs
:func:`services.karma.training.train_karma` in a thread, reports its stages through the job's
progress (``loading``, ``training`` step by step, ``evaluating``, ``saving``), stores the model
directory with its metrics and answers the evaluation with its baselines.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

from plaudit_wire.karma import BUNDLED, TrainRequest
from services.core.errors import InvalidInput
from services.core.jobs.context import JobContext, JobFunction, JobRegistry
from services.core.jobs.run_folders import CHECKPOINTS, run_folder
from services.core.jobs.store import ACTIVE, JobStore
from services.core.jobs.thread_progress import ThreadProgress, keeping_torch_threads
from services.core.settings import CoreSettings
from services.core.web.server_files import model_folder
from services.datasets.store import dataset_folder
from services.karma.data import SHARED_FILES, KarmaDataError, load_data
from services.karma.service import KarmaService
from services.karma.settings import KarmaSettings

log = logging.getLogger(__name__)

TRAIN = "karma.train"
#: A user's JSONL up to this size is read when the request arrives (bad lines: 422 at once).
CHECK_NOW_BYTES = 50 * 2**20


def data_path(data: str, settings: CoreSettings) -> Path:
    """Where ``data`` lives on this server: the shared folder for ``reddit_karma``, else a path
    (relative: under the data directory) inside one of the allowed folders."""
    if data == "reddit_karma":
        return karma_dir(settings)
    path = Path(data).expanduser()
    path = (path if path.is_absolute() else settings.data_dir / path).resolve()
    roots = allowed_roots(settings)
    if not any(path.is_relative_to(root) for root in roots):
        shown = ", ".join(str(r) for r in roots)
        raise InvalidInput(
            f"{data!r} is outside the folders this server reads training data from ({shown}; "
            "more with PLAUDIT_KARMA_DATA_ROOTS)",
            param="data",
        )
    return path


def karma_dir(settings: CoreSettings) -> Path:
    """The reddit_karma folder: PLAUDIT_KARMA_DATA_DIR, else the fetched dataset."""
    return dataset_folder(settings, "reddit_karma", KarmaSettings.of(settings).data_dir)


def allowed_roots(settings: CoreSettings) -> list[Path]:
    roots = [settings.data_dir, karma_dir(settings), *KarmaSettings.of(settings).data_roots]
    return [root.expanduser().resolve() for root in roots]


async def check_request(request: TrainRequest, settings: CoreSettings) -> None:
    """Refuse at once what the job would fail on: data that is missing, outside the allowed
    folders or (for a JSONL) unusable, and a base model that is not a folder."""
    path = data_path(request.data, settings)
    if request.data == "reddit_karma" or path.is_dir():
        missing = [name for name in SHARED_FILES if not (path / name).is_file()]
        if missing:
            what = "the shared reddit_karma data" if request.data == "reddit_karma" else path
            raise InvalidInput(
                f"{what} is not usable here: {path} lacks {', '.join(missing)}", param="data"
            )
    elif not path.is_file():
        raise InvalidInput(f"no file or folder {request.data!r} on the server", param="data")
    elif path.stat().st_size <= CHECK_NOW_BYTES:
        await asyncio.to_thread(_check_jsonl, path, request, settings)
    # One answer for a missing path, a plain folder and an unreadable one: no file-system
    # oracle (issue 23).
    if request.base_model != BUNDLED and not model_folder(Path(request.base_model).expanduser()):
        raise InvalidInput(
            f"base model {request.base_model[:300]!r} is not a model folder (one with "
            "config.json) that the server can read",
            param="base_model",
        )


def _check_jsonl(path: Path, request: TrainRequest, settings: CoreSettings) -> None:
    data = load_data(path, karma_dir(settings))
    for split in ("train", request.eval_split):
        if not data.split(split).pairs:
            raise KarmaDataError(
                f"{path}: no preference pairs in the {split} split (give rows a 'split', or "
                "enough threads for the 80/10/10 split by thread id)",
                param="data",
            )


def train_job(service: KarmaService, settings: CoreSettings) -> JobFunction:
    """The ``karma.train`` job, saving into this process's artifact store."""

    async def run(ctx: JobContext, params: dict[str, Any]) -> dict[str, Any]:
        from services.karma.training import train_karma

        request = TrainRequest.model_validate(params)
        path = data_path(request.data, settings)
        # A retry keeps the trainer's checkpoints of the attempt that died (issue 23), not
        # the model folder it may have half written. (The frozen method resumes from its
        # embedding cache instead, whose shards are written as it goes.)
        async with run_folder(ctx, settings.data_dir / "karma" / "runs" / ctx.job_id) as work:
            await ctx.progress(0, 1, "loading")
            reporter = ThreadProgress(ctx, asyncio.get_running_loop())
            config = request.config(work / "model")
            update: dict[str, Any] = {"checkpoint_dir": work / CHECKPOINTS}
            if request.data != "reddit_karma":
                update["data"] = str(path)
            config = config.model_copy(update=update)
            result = await asyncio.to_thread(
                keeping_torch_threads(train_karma),
                config,
                data_dir=karma_dir(settings),
                models_dir=work,
                cache_dir=KarmaSettings.of(settings).embeddings_dir,
                progress=reporter,
            )
            await ctx.progress(1, 2, "saving")
            version = await service.save(
                result.path, result.metrics, request, owner=ctx.owner, job_id=ctx.job_id
            )
            await ctx.progress(2, 2, "saving")
        return job_result(result.metrics, version.name, version.version, version.current)

    return run


def job_result(metrics: dict[str, Any], name: str, version: int, serving: bool) -> dict[str, Any]:
    """The job's answer: the stored version, the evaluation with its baselines, the run."""
    return {
        "model": {"name": name, "version": version, "serving": serving},
        "variant": metrics["variant"],
        "base_model": metrics["base_model"],
        "evaluation": metrics["evaluation"],
        "training": metrics["training"],
        "data": metrics["data"],
        "params": metrics["params"],
    }


async def training_under(store: JobStore, name: str) -> bool:
    """Whether a ``karma.train`` job that saves under ``name`` is queued or running."""
    for state in ACTIVE:
        found, _ = await store.page(owner=None, everyone=True, kind=TRAIN, state=state, limit=500)
        if any(job.params.get("name", "karma") == name for job in found):
            return True
    return False


def register(registry: JobRegistry, service: KarmaService, settings: CoreSettings) -> None:
    """Register ``karma.train`` for this process's KARMA service."""
    registry.register(TRAIN, train_job(service, settings))
