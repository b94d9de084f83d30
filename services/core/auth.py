"""API keys with scopes. With no keys configured the server is open, and binds only to loopback."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from fastapi import Request

from services.core.errors import Forbidden, InvalidInput, Unauthorized
from services.core.settings import Scope, Settings, is_loopback


def check_bind_allowed(settings: Settings, host: str) -> None:
    """Refuse a non-loopback bind when no API keys are configured."""
    if not settings.api_keys and not is_loopback(host):
        raise InvalidInput(
            f"refusing to listen on {host!r} without API keys: set PLAUDIT_API_KEYS "
            '(for example \'{"my-secret-key": ["reward", "admin"]}\') or bind to 127.0.0.1',
            param="host",
        )


def _presented_key(request: Request) -> str | None:
    auth = request.headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip()
    return request.headers.get("x-api-key")


def scopes_for(settings: Settings, key: str | None) -> set[Scope] | None:
    """The scopes of a presented key, or None when the key is unknown."""
    if key is None:
        return None
    for known, scopes in settings.api_keys.items():
        if hmac.compare_digest(known.encode(), key.encode()):
            return set(scopes)
    return None


def require_scope(scope: Scope) -> Callable[[Request], Awaitable[None]]:
    """A FastAPI dependency that lets a request through only with a key holding ``scope``."""

    async def dependency(request: Request) -> None:
        settings: Settings = request.app.state.settings
        if not settings.api_keys:
            return
        scopes = scopes_for(settings, _presented_key(request))
        if scopes is None:
            raise Unauthorized("missing or unknown API key (send 'Authorization: Bearer KEY')")
        if scope not in scopes:
            raise Forbidden(f"this API key lacks the {scope.value!r} scope")

    return dependency


def key_owner(key: str) -> str:
    """A stable, non-secret name for an API key (a short sha256), stored beside what it made."""
    return "key-" + hashlib.sha256(key.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Caller:
    """Who is calling: the key's owner name (None when auth is off) and whether it is an admin.

    With no keys configured the server is open and every caller is an admin.
    """

    owner: str | None
    admin: bool


def caller_with(*scopes: Scope) -> Callable[[Request], Awaitable[Caller]]:
    """A FastAPI dependency: the :class:`Caller`, whose key must hold one of ``scopes``."""

    async def dependency(request: Request) -> Caller:
        settings: Settings = request.app.state.settings
        if not settings.api_keys:
            return Caller(owner=None, admin=True)
        key = _presented_key(request)
        held = scopes_for(settings, key)
        if key is None or held is None:
            raise Unauthorized("missing or unknown API key (send 'Authorization: Bearer KEY')")
        if not held & set(scopes):
            names = " or ".join(repr(s.value) for s in scopes)
            raise Forbidden(f"this API key lacks the {names} scope")
        return Caller(owner=key_owner(key), admin=Scope.admin in held)

    return dependency
