"""The model layer's seam for services: every role's backend comes from
:func:`judges.backends.factory.build_backend`, here with the process's model cache and Redis
(docs/models.md, issue 19). A role's settings say whether it has a backend of its own
(:func:`judges.backends.settings.resolve_role`).

Example::

    backend = model_backend(settings, "judge", JudgeSettings.of(settings))
"""

from __future__ import annotations

from judges.backends.base import JudgeBackend
from judges.backends.factory import OnBatch, build_backend
from judges.backends.settings import ModelSettings
from services.core.settings import CoreSettings


def model_backend(
    settings: CoreSettings, role: str, model: ModelSettings, *, on_batch: OnBatch | None = None
) -> JudgeBackend:
    """``role``'s backend as ``model`` describes it, with this process's model cache folder
    and Redis (limits shared by replicas); ``on_batch`` sees the local backend's merged calls."""
    return build_backend(
        model,
        role=role,
        models_dir=settings.models_dir,
        redis_url=settings.redis_url,
        on_batch=on_batch,
    )
