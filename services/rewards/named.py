"""Named, versioned reward specs, kept in the artifact store (kind ``reward_spec``).

A saved version holds the *resolved* spec (defaults filled, templates pinned), so
``"spec": "helpful@3"`` scores the same way forever, whatever defaults later releases bring.

Specs belong to the tenant (API key) that saved them (issue 23, finding 1): a tenant's
``helpful`` is stored as ``<owner>~helpful``, so another key neither sees it nor overwrites it,
and may save its own ``helpful``. An admin may save a spec with ``"shared": true``: it is stored
under its plain name and every tenant can score with it (a tenant's own spec of the same name
comes first). An admin sees every spec and names a tenant's as ``<owner>~<name>``. Without keys
every spec is shared, as before.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from plaudit_wire.artifacts import ArtifactVersion
from plaudit_wire.names import OWNER_SEPARATOR
from plaudit_wire.rewards import NamedSpec, SpecSaveRequest
from services.core.channels import ChannelRegistry
from services.core.context import Principal, current_principal
from services.core.db.tables import utc_iso
from services.core.errors import Forbidden, InvalidInput, NotFound
from services.core.store.artifacts import ArtifactStore
from services.core.store.refs import ArtifactRef, owned_name, parse_ref, split_owned
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
        caller = current_principal()
        if request.shared and not caller.admin:
            raise Forbidden("only an admin key may save a shared spec", param="shared")
        resolved = resolve_spec(request.spec, self._channels)
        owner = None if request.shared else caller.owner
        saved = await self._store.put(
            owned_name(owner, request.name),
            KIND,
            resolved.as_dict(),
            expected_version=request.expected_version,
            owner=caller.owner,
            metadata={"spec_hash": resolved.hash},
        )
        return _named(saved.version, created=saved.created)

    async def get(self, ref: str) -> NamedSpec:
        return _named(await self._version(ref, param="name"))

    async def versions(self, name: str, *, limit: int, offset: int) -> tuple[list[NamedSpec], int]:
        stored = (await self._version(name, param="name")).name
        infos, total = await self._store.list_versions(stored, limit=limit, offset=offset)
        found = [await self._store.get(stored, info.version) for info in infos]
        return [_named(v) for v in found], total

    async def names(self, *, limit: int, offset: int) -> tuple[list[NamedSpec], int]:
        caller = current_principal()
        scope = None if caller.admin else caller.owner
        infos, total = await self._store.list_artifacts(
            kind=KIND, limit=limit, offset=offset, visible_to=scope
        )
        return [_named(await self._store.get(info.name)) for info in infos], total

    async def in_use(self, raw: Any) -> SpecInUse:
        """An inline spec as it is, or a saved one by ``name`` / ``name@N`` (422 if unknown)."""
        if not isinstance(raw, str):
            return SpecInUse(resolve_spec(raw, self._channels))
        try:
            version = await self._version(raw, param="spec")
        except NotFound as exc:
            raise InvalidInput(exc.message, param="spec") from None
        return SpecInUse(
            resolve_spec(version.content, self._channels), _public(version.name), version.version
        )

    async def _version(self, text: str, *, param: str) -> ArtifactVersion:
        """The version ``text`` names that the caller may see; NotFound naming what exists."""
        caller = current_principal()
        ref = _parse(text, caller, param)
        for stored in _candidates(ref.name, caller):
            try:
                found = await self._store.get(stored, ref.version)
            except NotFound as exc:
                if exc.param == "version":
                    raise NotFound(exc.message.replace(stored, ref.name), param=param) from None
                continue
            if found.kind == KIND:
                return found
        raise NotFound(await self._unknown(ref.name, caller), param=param)

    async def _unknown(self, name: str, caller: Principal) -> str:
        scope = None if caller.admin else caller.owner
        infos, total = await self._store.list_artifacts(kind=KIND, limit=20, visible_to=scope)
        known = ", ".join(repr(_public(i.name)) for i in infos) or "none"
        more = f" and {total - len(infos)} more" if total > len(infos) else ""
        return f"no reward spec named {name[:140]!r}; saved specs: {known}{more}"


def _parse(text: str, caller: Principal, param: str) -> ArtifactRef:
    """``name``/``name@N``; an admin may also write ``<owner>~name[@N]``."""
    owner, rest = split_owned(text)
    if owner is None or not caller.admin:
        return parse_ref(text, param)
    ref = parse_ref(rest, param)
    return ArtifactRef(owned_name(owner, ref.name), ref.version)


def _candidates(name: str, caller: Principal) -> list[str]:
    """Stored names to try, in order: the caller's own spec, then the shared one."""
    if OWNER_SEPARATOR in name or caller.owner is None:
        return [name]
    return [owned_name(caller.owner, name), name]


def _public(stored: str) -> str:
    return split_owned(stored)[1]


def _named(version: ArtifactVersion, *, created: bool = False) -> NamedSpec:
    content: dict[str, Any] = version.content
    owner, name = split_owned(version.name)
    return NamedSpec(
        name=name,
        owner=owner,
        version=version.version,
        spec=content,
        spec_hash=str(version.metadata.get("spec_hash", "")),
        current=version.current,
        created=created,
        created_at=utc_iso(version.created_at),
    )
