"""Named, versioned reward specs, kept in the artifact store (kind ``reward_spec``).

A saved version holds the *resolved* spec (defaults filled, templates pinned), so
``"spec": "helpful@3"`` scores the same way forever, whatever defaults later releases bring.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from services.core.channels import ChannelRegistry
from services.core.context import current_principal
from services.core.store import ArtifactStore
from services.core.store_models import ArtifactVersion
from services.rewards.schemas import NamedSpec, SpecSaveRequest
from services.rewards.spec import ResolvedSpec, resolve_spec

KIND = "reward_spec"


@dataclass(frozen=True)
class SpecInUse:
    """The spec a request scores with, and its name and version when it was a saved one."""

    spec: ResolvedSpec
    name: str | None = None
    version: int | None = None


class NamedSpecs:
    """Save, read and resolve named reward specs.

    Example: ``await specs.save(SpecSaveRequest(name="helpful", spec={...}))`` then score with
    ``{"spec": "helpful"}`` or ``{"spec": "helpful@1"}``.
    """

    def __init__(self, store: ArtifactStore, channels: ChannelRegistry) -> None:
        self._store = store
        self._channels = channels

    async def save(self, request: SpecSaveRequest) -> NamedSpec:
        resolved = resolve_spec(request.spec, self._channels)
        saved = await self._store.put(
            request.name,
            KIND,
            resolved.as_dict(),
            expected_version=request.expected_version,
            owner=current_principal().owner,
            metadata={"spec_hash": resolved.hash},
        )
        return _named(saved.version, created=saved.created)

    async def get(self, ref: str) -> NamedSpec:
        return _named(await self._store.resolve(ref, KIND, param="name"))

    async def versions(self, name: str, *, limit: int, offset: int) -> tuple[list[NamedSpec], int]:
        infos, total = await self._store.list_versions(name, limit=limit, offset=offset)
        found = [await self._store.get(name, info.version) for info in infos]
        if found and found[0].kind != KIND:
            found = []
        return [_named(v) for v in found], total

    async def names(self, *, limit: int, offset: int) -> tuple[list[NamedSpec], int]:
        infos, total = await self._store.list_artifacts(kind=KIND, limit=limit, offset=offset)
        return [_named(await self._store.get(info.name)) for info in infos], total

    async def in_use(self, raw: Any) -> SpecInUse:
        """An inline spec as it is, or a saved one by ``name`` / ``name@N`` (422 if unknown)."""
        if not isinstance(raw, str):
            return SpecInUse(resolve_spec(raw, self._channels))
        version = await self._store.resolve(raw, KIND, param="spec")
        return SpecInUse(
            resolve_spec(version.content, self._channels), version.name, version.version
        )


def _named(version: ArtifactVersion, *, created: bool = False) -> NamedSpec:
    content: dict[str, Any] = version.content
    return NamedSpec(
        name=version.name,
        version=version.version,
        spec=content,
        spec_hash=str(version.metadata.get("spec_hash", "")),
        current=version.current,
        created=created,
        created_at=version.created_at.isoformat(),
    )
