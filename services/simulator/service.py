"""Serving the user simulator: one turn, whole episodes against a policy server, and the
stored calibrations.

The uncalibrated simulator is a chat model prompted with the user's goal (by default the
judge's own backend, the embedded SmolLM2-135M); its satisfaction is the model's prompted
1-5 estimate. A calibration (``name@version`` in the versioned store, kind
``simulator_calibration``) adds a LoRA adapter, merged into the base model and served by its
own model worker, and a fitted satisfaction predictor on sentence embeddings::

    service = SimulatorService(settings, store, embedder, base_backend)
    answer = await service.turn(TurnRequest(goal="You want a cheap hotel.", messages=[]))
    answer.message.content, answer.done
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from judges.backends.base import ChoiceRequest, GenerateRequest, JudgeBackend
from judges.backends.settings import resolve_role
from plaudit_wire.artifacts import ArtifactVersion, VersionInfo
from plaudit_wire.simulator import (
    CalibrationOut,
    CalibrationPage,
    EpisodeRequest,
    EpisodeResponse,
    EpisodeTurn,
    SatisfactionOut,
    TurnRequest,
    TurnResponse,
    UserMessage,
)
from services.core.errors import BackendUnavailable, InvalidInput, NotFound
from services.core.models.embedder import BatchedEmbedder
from services.core.settings import CoreSettings
from services.core.store.artifacts import ArtifactStore
from services.core.store.refs import parse_ref
from services.judge.settings import JudgeSettings
from services.simulator.acts import ActModel, Acts, Context, context_texts
from services.simulator.acts import features as act_features
from services.simulator.policy import PolicyClient, PolicyError
from services.simulator.predictor import SatisfactionPredictor, expected
from services.simulator.prompting import (
    LEVELS,
    ReadTurn,
    Said,
    read_turn,
    satisfaction_messages,
    simulator_messages,
)
from services.simulator.settings import SimulatorSettings

log = logging.getLogger(__name__)
KIND = "simulator_calibration"
#: Rewrites of a calibrated turn whose question mark disagrees with the chosen act.
ACT_RETRIES = 2


@dataclass
class _Calibrated:
    ref: str
    backend: JudgeBackend
    predictor: SatisfactionPredictor
    acts: ActModel | None = None  # calibrations before issue 24 have none


class SimulatorService:
    def __init__(
        self,
        settings: CoreSettings,
        store: ArtifactStore,
        embedder: BatchedEmbedder | None,
        base: JudgeBackend,
        *,
        loaded: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.settings = settings
        self.section = SimulatorSettings.of(settings)
        self._store = store
        self._embedder = embedder
        self.base = base
        self._loaded: OrderedDict[str, _Calibrated] = OrderedDict()
        self._lock = asyncio.Lock()
        self._started = False
        # models load one at a time at start-up (two threads importing transformers at once
        # can see a half-initialised module): wait for them before loading one here
        self._loaded_models = loaded

    @property
    def embedder(self) -> BatchedEmbedder | None:
        return self._embedder

    # --- one turn -----------------------------------------------------------------------

    async def turn(self, request: TurnRequest) -> TurnResponse:
        if len(request.messages) > self.section.max_messages:
            raise InvalidInput(
                f"{len(request.messages)} messages: this server simulates dialogues of at most "
                f"{self.section.max_messages} (PLAUDIT_SIMULATOR_MAX_MESSAGES)",
                param="messages",
            )
        calibrated = await self.calibrated(request.calibration)
        history = [Said(m.role == "user", m.content) for m in request.messages]
        return await self._turn(request, history, calibrated)

    async def _turn(
        self, sampling: Any, history: Sequence[Said], calibrated: _Calibrated | None
    ) -> TurnResponse:
        backend = calibrated.backend if calibrated else await self._base()
        acts = await self._acts(sampling, history, calibrated)
        read = await self._write(backend, sampling, history, acts)
        if acts is not None:
            for attempt in range(1, ACT_RETRIES + 1):  # the question act, as offline (rollout)
                if ("?" in read.text) == acts.question:
                    break
                again = await self._write(backend, sampling, history, acts, attempt)
                read = again if ("?" in again.text) == acts.question else read
            read = ReadTurn(read.text, acts.end, "end_marker" if acts.end else None)
        satisfaction, problem = None, None
        last_assistant = next((s.text for s in reversed(history) if not s.by_user), None)
        if history and not history[-1].by_user and last_assistant is not None:
            satisfaction, problem = await self._satisfaction(
                sampling.goal, last_assistant, read.text, calibrated, backend
            )
        return TurnResponse(
            message=UserMessage(content=read.text),
            done=read.done,
            done_reason=read.done_reason,
            satisfaction=satisfaction,
            satisfaction_error=problem,
            calibration=calibrated.ref if calibrated else None,
            model=backend.info.model_id,
        )

    async def _acts(
        self, sampling: Any, history: Sequence[Said], calibrated: _Calibrated | None
    ) -> Acts | None:
        """The calibration's act model's choice for this turn (None: uncalibrated, or a
        calibration without one, or no embedder in this process)."""
        if calibrated is None or calibrated.acts is None or self._embedder is None:
            return None
        last = next((s.text for s in reversed(history) if not s.by_user), None)
        context = Context(sampling.goal, last, sum(s.by_user for s in history))
        vectors = await self._embedder.embed(context_texts([context]))
        rng = random.Random(sampling.seed) if sampling.seed is not None else random.Random()
        [acts] = calibrated.acts.decide(act_features([context], vectors), rng)
        return acts

    async def _write(
        self,
        backend: JudgeBackend,
        sampling: Any,
        history: Sequence[Said],
        acts: Acts | None,
        attempt: int = 0,
    ) -> ReadTurn:
        seed = sampling.seed
        if seed is not None and attempt:
            seed += 7919 * attempt
        [result] = await backend.generate(
            [
                GenerateRequest(
                    messages=simulator_messages(sampling.goal, history, acts),
                    max_new_tokens=sampling.max_new_tokens or self.section.max_new_tokens,
                    temperature=sampling.temperature,
                    top_p=sampling.top_p,
                    seed=seed,
                )
            ]
        )
        if result.status == "invalid":
            raise InvalidInput(
                f"the simulator cannot read this dialogue: {result.error}", param="messages"
            )
        if not result.ok:
            raise BackendUnavailable(
                f"the simulator's model failed ({result.status}): {result.error}", retry_after=5
            )
        return read_turn(result.text)

    async def _satisfaction(
        self,
        goal: str,
        assistant: str,
        reply: str,
        calibrated: _Calibrated | None,
        backend: JudgeBackend,
    ) -> tuple[SatisfactionOut | None, str | None]:
        if calibrated is not None:
            if self._embedder is None:
                return None, "no embedder in this process for the satisfaction predictor"
            answer = reply or "(empty)"
            vectors = await self._embedder.embed([assistant, answer])
            x = calibrated.predictor.features(vectors[:1], vectors[1:2], ([assistant], [answer]))
            dist = calibrated.predictor.distribution(x)[0].tolist()
            return _satisfaction_out(dist, "predictor"), None
        [scored] = await backend.score_choices(
            [
                ChoiceRequest(
                    messages=satisfaction_messages(goal, assistant, reply), candidates=LEVELS
                )
            ]
        )
        if not scored.ok:
            return None, f"the prompted estimate failed ({scored.status}): {scored.error}"
        return _satisfaction_out(list(scored.probs), "prompted"), None

    async def _base(self) -> JudgeBackend:
        if not self._started:
            await self._after_startup_loads()
            try:
                await self.base.start()
            except Exception as exc:
                raise BackendUnavailable(
                    f"the simulator's model could not be loaded: {type(exc).__name__}: {exc}",
                    retry_after=30,
                ) from exc
            self._started = True
        return self.base

    async def _after_startup_loads(self) -> None:
        if self._loaded_models is not None:
            await self._loaded_models()

    # --- episodes -----------------------------------------------------------------------

    async def episode(self, request: EpisodeRequest) -> EpisodeResponse:
        """Alternate the simulator and the policy until the user ends, ``max_turns`` user
        turns were said, or one side fails (a per-episode status, never a 500)."""
        calibrated = await self.calibrated(request.calibration)
        policy = PolicyClient(request.policy, timeout_s=self.section.episode_timeout_s)
        history: list[Said] = []
        turns: list[EpisodeTurn] = []
        termination, error, final, ended_by = "max_turns", None, None, None
        try:
            for index in range(request.max_turns + 1):
                seeded = request.model_copy(
                    update={"seed": None if request.seed is None else request.seed + index}
                )
                try:
                    said = await self._turn(seeded, history, calibrated)
                except BackendUnavailable as exc:
                    termination, error = "simulator_error", exc.message
                    break
                if index == request.max_turns:  # only the rating of the last answer
                    final = said.satisfaction
                    break
                history.append(Said(True, said.message.content))
                turns.append(
                    EpisodeTurn(
                        user=said.message.content, assistant=None, satisfaction=said.satisfaction
                    )
                )
                if said.done:
                    termination, ended_by = "user_done", said.done_reason
                    break
                try:
                    reply = await policy.reply(history)
                except PolicyError as exc:
                    termination, error = "policy_error", str(exc)
                    break
                history.append(Said(False, reply))
                turns[-1] = turns[-1].model_copy(update={"assistant": reply})
        finally:
            await policy.aclose()
        model = (calibrated.backend if calibrated else self.base).info.model_id
        return EpisodeResponse(
            turns=turns,
            messages=[
                {"role": "user" if s.by_user else "assistant", "content": s.text} for s in history
            ],
            termination=termination,
            done_reason=ended_by,
            error=error,
            final_satisfaction=final,
            calibration=calibrated.ref if calibrated else None,
            model=model,
        )

    # --- calibrations -------------------------------------------------------------------

    async def calibrated(self, ref: str | None) -> _Calibrated | None:
        """The loaded calibration ``ref`` names (None: uncalibrated); 422 when unknown."""
        if ref is None:
            return None
        version = await self._resolve(ref)
        key = version.ref
        async with self._lock:
            found = self._loaded.get(key)
            if found is not None:
                self._loaded.move_to_end(key)
                return found
            found = await self._load(version)
            self._loaded[key] = found
            while len(self._loaded) > self.section.loaded_calibrations:
                _, old = self._loaded.popitem(last=False)
                await old.backend.aclose()
            return found

    async def _resolve(self, ref: str) -> ArtifactVersion:
        parsed = parse_ref(ref, param="calibration")
        try:
            found = await self._store.get(parsed.name, parsed.version)
        except NotFound:
            raise InvalidInput(
                f"no calibration {ref!r} on this server: list them with GET "
                "/v1/simulator/calibrations, or train one (POST /v1/simulator/calibrations)",
                param="calibration",
            ) from None
        if found.kind != KIND:
            raise InvalidInput(
                f"{ref!r} is a {found.kind}, not a simulator calibration", param="calibration"
            )
        return found

    async def _load(self, version: ArtifactVersion) -> _Calibrated:
        from services.simulator.model import ADAPTER_DIR, CalibratedBackend

        folder = self._store.payload_path(version)
        if folder is None or not folder.is_dir():
            raise BackendUnavailable(f"the files of the calibration {version.ref} are missing")
        await self._after_startup_loads()
        predictor = await asyncio.to_thread(SatisfactionPredictor.load, folder)
        acts = await asyncio.to_thread(ActModel.load, folder)
        own = resolve_role(self.section.llm, JudgeSettings.of(self.settings))
        # the calibrated copy runs as the base model does
        local = own or JudgeSettings.of(self.settings)
        backend = CalibratedBackend(
            folder / ADAPTER_DIR,
            own.model if own is not None and own.backend == "local" else None,
            cache_dir=self.settings.models_dir,
            max_batch_size=local.max_batch_size,
            max_input_tokens=local.max_input_tokens,
            batch_max_rows=local.batch_max_rows,
            batch_max_wait_s=local.batch_max_wait_ms / 1000,
        )
        if not (folder / ADAPTER_DIR).is_dir():
            backend = await self._base()  # type: ignore[assignment]  # predictor-only
        return _Calibrated(version.ref, backend, predictor, acts)

    async def save(
        self,
        folder: Path,
        metrics: dict[str, Any],
        name: str,
        *,
        owner: str | None,
        job_id: str | None,
        note: str | None,
    ) -> ArtifactVersion:
        saved = await self._store.put(
            name,
            KIND,
            headline(metrics),
            metadata={"job_id": job_id, "base_model": metrics["base_model"]},
            files=folder,
            owner=owner,
            note=note,
        )
        return saved.version

    async def calibrations(self, name: str | None, *, limit: int, offset: int) -> CalibrationPage:
        """Stored calibrations, newest first (one name, or every simulator calibration)."""
        if name is not None:
            try:
                info = await self._store.info(name)
            except NotFound:
                return CalibrationPage(items=[], limit=limit, offset=offset, total=0)
            if info.kind != KIND:
                raise InvalidInput(f"{name!r} is not a simulator calibration", param="name")
            versions, total = await self._store.list_versions(name, limit=limit, offset=offset)
            items = [await self._out(v) for v in versions]
            return CalibrationPage(items=items, limit=limit, offset=offset, total=total)
        every: list[VersionInfo] = []
        artifacts, _ = await self._store.list_artifacts(kind=KIND, limit=1000, offset=0)
        for artifact in artifacts:
            versions, _ = await self._store.list_versions(artifact.name, limit=1000, offset=0)
            every.extend(versions)
        every.sort(key=lambda v: (v.created_at, v.name, v.version), reverse=True)
        items = [await self._out(v) for v in every[offset : offset + limit]]
        return CalibrationPage(items=items, limit=limit, offset=offset, total=len(every))

    async def _out(self, version: VersionInfo) -> CalibrationOut:
        full = await self._store.get(version.name, version.version)
        return CalibrationOut(
            name=version.name,
            version=version.version,
            ref=version.ref,
            current=version.current,
            metrics=full.content if isinstance(full.content, dict) else {},
            created_at=version.created_at,
            owner=version.owner,
            job_id=version.metadata.get("job_id"),
        )

    async def aclose(self) -> None:
        for calibrated in self._loaded.values():
            if calibrated.backend is not self.base:
                await calibrated.backend.aclose()
        self._loaded.clear()


def _satisfaction_out(distribution: Sequence[float], source: str) -> SatisfactionOut:
    dist = [float(p) for p in distribution]
    total = sum(dist) or 1.0
    dist = [p / total for p in dist]
    return SatisfactionOut(
        expected=round(expected(dist), 4),
        distribution=[round(p, 4) for p in dist],
        source=source,
    )


def headline(metrics: dict[str, Any]) -> dict[str, Any]:
    """What a listing shows: per domain before/after, the run's size and time."""
    realism = metrics["realism"]
    keys = ("classifier_accuracy", "length_w1", "question_rate", "satisfaction", "end")

    def pick(run: dict[str, Any] | None) -> dict[str, Any] | None:
        if run is None:
            return None
        groups = {**run["domains"], "all": run["all"]}
        return {d: {k: g[k] for k in keys} for d, g in groups.items()}

    return {
        "base_model": metrics["base_model"],
        "split": realism["split"],
        "contexts": realism["contexts"],
        "before": pick(realism.get("before")),
        "after": pick(realism.get("after")),
        "training": metrics["training"],
        "data": metrics["data"],
    }
