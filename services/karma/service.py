"""Serving KARMA models: trained versions in the artifact store, one of them serving.

A training job saves its model directory as a new version of an artifact (``karma`` by
default, kind ``karma_model``) with its metrics; the store's current pointer is the version
that serves. The first version of a name serves at once; later ones serve when promoted.
Scoring resolves the serving version (re-read every ``refresh_s``, so a promotion made by
another process shows quickly) and scores through that version's micro-batching worker::

    service = KarmaService(KarmaSettings.of(settings), resources.artifacts)
    answer = await service.score(ScoreRequest(context="Any tips?", replies=["a", "b"]))
    answer.scores, answer.model.version
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from judges.lifecycle import ModelUnavailable
from judges.model_worker import BatchRecord
from plaudit_wire.artifacts import ArtifactVersion, VersionInfo
from plaudit_wire.karma import (
    KarmaModelOut,
    KarmaModelPage,
    ModelRef,
    PromoteRequest,
    PromoteResponse,
    ScoreRequest,
    ScoreResponse,
    TrainRequest,
)
from plaudit_wire.schemas import Message
from services.core.errors import BackendUnavailable, InvalidInput, NotFound, PlauditError
from services.core.store.artifacts import ArtifactStore
from services.core.store.refs import parse_ref
from services.karma.features import KarmaInput, context_text
from services.karma.scorers import ScorerPool
from services.karma.settings import KarmaSettings

KIND = "karma_model"
#: How long a client should wait before asking again when no model serves (a training run
#: on the CPU default takes minutes).
NO_MODEL_RETRY_S = 60


class NoKarmaModel(BackendUnavailable):
    """No trained model serves under the requested name (503, with how to train one)."""

    error_type = "model_not_trained"


class KarmaService:
    """Scores replies with the serving KARMA model; lists, saves and promotes versions."""

    def __init__(
        self,
        settings: KarmaSettings,
        store: ArtifactStore,
        *,
        on_batch: Callable[[BatchRecord], None] | None = None,
        training: Callable[[str], Awaitable[bool]] | None = None,
    ) -> None:
        """``training(name)``: whether a training job for ``name`` is queued or running."""
        self.settings = settings
        self._store = store
        self._training = training
        self.pool = ScorerPool(settings, on_batch=on_batch)
        self._serving: dict[str, tuple[float, ArtifactVersion]] = {}
        self._pinned: dict[str, ArtifactVersion] = {}
        self._lock = asyncio.Lock()

    # --- scoring ----------------------------------------------------------------------

    async def score(self, request: ScoreRequest) -> ScoreResponse:
        """One score per reply, from the serving version (or the one ``model`` names)."""
        scores, version = await self.score_texts(
            request.context, request.replies, request.metadata, model=request.model
        )
        return ScoreResponse(scores=scores, model=model_ref(version))

    async def score_texts(
        self,
        context: str | Sequence[Message],
        replies: Sequence[str],
        metadata: Mapping[str, Any] | None = None,
        *,
        model: str | None = None,
    ) -> tuple[list[float], ArtifactVersion]:
        """Scores of ``replies`` to ``context`` and the version that produced them."""
        version = await self.resolve(model)
        turns = (context,) if isinstance(context, str) else _message_turns(context)
        text = context_text(turns)
        fields = {k: str(v) for k, v in (metadata or {}).items()}
        rows = [KarmaInput(text, reply, fields, turns) for reply in replies]
        worker = self.pool.worker(version.ref, self._payload(version))
        try:
            scores = await worker.submit(rows)
        except ModelUnavailable as exc:
            loading = exc.readiness.state in ("idle", "loading")
            raise BackendUnavailable(
                f"the KARMA model {version.ref} is not available: {exc}",
                retry_after=5 if loading else None,
            ) from exc
        return scores, version

    async def resolve(self, model: str | None = None) -> ArtifactVersion:
        """The version ``model`` names (``name`` or ``name@N``; default the serving one)."""
        ref = parse_ref(model or self.settings.model, param="model")
        if ref.version is not None:  # versions never change: read each once
            pinned = self._pinned.get(str(ref))
            if pinned is None:
                pinned = self._pinned[str(ref)] = await self._get(ref.name, ref.version)
            return pinned
        cached = self._serving.get(ref.name)
        if cached is not None and time.monotonic() - cached[0] < self.settings.refresh_s:
            return cached[1]
        async with self._lock:  # many concurrent requests share one read
            cached = self._serving.get(ref.name)
            if cached is not None and time.monotonic() - cached[0] < self.settings.refresh_s:
                return cached[1]
            version = await self._get(ref.name, None)
            self._serving[ref.name] = (time.monotonic(), version)
            return version

    async def _get(self, name: str, version: int | None) -> ArtifactVersion:
        try:
            found = await self._store.get(name, version)
        except NotFound as exc:
            if version is not None and "has no version" in exc.message:
                raise InvalidInput(exc.message, param="model") from None
            raise await self._missing(name) from None
        if found.kind != KIND:
            raise InvalidInput(f"{name!r} is a {found.kind}, not a KARMA model", param="model")
        return found

    async def _missing(self, name: str) -> PlauditError:
        """503 while a model of that name is being trained, else a 404 naming the models
        there are (issue 23: a 503 for a name nobody trains had clients retry for minutes)."""
        if self._training is not None and await self._training(name):
            return no_model(name)
        infos, total = await self._store.list_artifacts(kind=KIND, limit=20)
        known = ", ".join(repr(info.name) for info in infos) or "none yet"
        more = f" and {total - len(infos)} more" if total > len(infos) else ""
        return NotFound(
            f"no KARMA model named {name[:140]!r} and none is being trained; trained models: "
            f"{known}{more} (train one with POST /v1/karma/train, admin key)",
            param="model",
        )

    def _payload(self, version: VersionInfo) -> Path:
        path = self._store.payload_path(version)
        if path is None or not path.is_dir():
            raise BackendUnavailable(f"the files of the KARMA model {version.ref} are missing")
        return path

    # --- versions ---------------------------------------------------------------------

    async def models(self, name: str | None, *, limit: int, offset: int) -> KarmaModelPage:
        """The versions of ``name`` (default the served name), newest first."""
        name = name or self.settings.model
        try:
            info = await self._store.info(name)
        except NotFound:
            return KarmaModelPage(
                name=name, serving_version=None, items=[], limit=limit, offset=offset, total=0
            )
        if info.kind != KIND:
            raise InvalidInput(f"{name!r} is a {info.kind}, not a KARMA model", param="name")
        versions, total = await self._store.list_versions(name, limit=limit, offset=offset)
        return KarmaModelPage(
            name=name,
            serving_version=info.current_version,
            items=[model_out(v) for v in versions],
            limit=limit,
            offset=offset,
            total=total,
        )

    async def promote(
        self, name: str | None, version: int, body: PromoteRequest, owner: str | None
    ) -> PromoteResponse:
        """Serve ``version`` of ``name`` (recorded in the artifact's history)."""
        name = name or self.settings.model
        info = await self._store.info(name)
        if info.kind != KIND:
            raise InvalidInput(f"{name!r} is a {info.kind}, not a KARMA model", param="name")
        moved = await self._store.promote(
            name, version, expected_version=body.expected_version, owner=owner, note=body.note
        )
        self._serving.pop(name, None)
        return PromoteResponse(
            name=name,
            serving_version=moved.artifact.current_version,
            previous_version=info.current_version,
            moved=moved.event is not None,
        )

    async def save(
        self,
        folder: Path,
        metrics: dict[str, Any],
        request: TrainRequest,
        *,
        owner: str | None,
        job_id: str | None,
    ) -> ArtifactVersion:
        """Store a trained model directory as a new version; serve it when nothing serves
        under its name yet, or when the request asks to."""
        saved = await self._store.put(
            request.name,
            KIND,
            metrics,
            metadata=version_metadata(metrics, job_id),
            files=folder,
            owner=owner,
            note=request.note,
            make_current=request.promote,
        )
        self._serving.pop(request.name, None)
        return saved.version

    async def aclose(self) -> None:
        await self.pool.aclose()


def no_model(name: str) -> NoKarmaModel:
    return NoKarmaModel(
        f"no KARMA model named {name!r} has been trained on this server yet: train one with "
        "`plaudit karma train --server URL` or POST /v1/karma/train (admin key); the first "
        f"version trained under {name!r} serves as soon as its job succeeds",
        param="model",
        retry_after=NO_MODEL_RETRY_S,
    )


def _message_turns(messages: Sequence[Message]) -> tuple[str, ...]:
    """Chat messages as the model reads a conversation (``role: content``, oldest first)."""
    return tuple(f"{m.role}: {m.content}" for m in messages)


def model_ref(version: ArtifactVersion) -> ModelRef:
    return ModelRef(
        name=version.name, version=version.version, variant=version.metadata.get("variant")
    )


def version_metadata(metrics: dict[str, Any], job_id: str | None) -> dict[str, Any]:
    """What a listing shows of a version: variant, base model, the headline metrics."""
    evaluation = metrics["evaluation"]
    length = evaluation["baselines"]["length"]
    return {
        "variant": metrics["variant"],
        "method": metrics.get("method", "finetune"),
        "base_model": metrics["base_model"],
        "job_id": job_id,
        "metrics": {
            "split": evaluation["split"],
            "pairs": evaluation["pairs"],
            "pair_accuracy": evaluation["pair_accuracy"],
            "spearman": evaluation["spearman"]["mean"],
            "baselines": {
                "length": {
                    "pair_accuracy": length["pair_accuracy"],
                    "spearman": length["spearman"]["mean"],
                },
                "random": {"pair_accuracy": 0.5, "spearman": 0.0},
            },
            "train_pairs": metrics["training"]["sibling_pairs"]
            + metrics["training"]["ranking_pairs"],
            "train_seconds": metrics["training"]["train_seconds"],
        },
    }


def model_out(version: VersionInfo) -> KarmaModelOut:
    meta = version.metadata
    return KarmaModelOut(
        name=version.name,
        version=version.version,
        serving=version.current,
        variant=meta.get("variant"),
        base_model=meta.get("base_model"),
        metrics=meta.get("metrics", {}),
        created_at=version.created_at,
        owner=version.owner,
        job_id=meta.get("job_id"),
        bytes=version.payload.bytes if version.payload else None,
    )
