"""API keys with scopes. With no keys configured the server is open, and binds only to loopback."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Awaitable, Callable

from fastapi import Request

from services.core.context import OPEN, Principal, principal_var
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


def key_owner(key: str) -> str:
    """A stable, non-secret id of an API key (``key_`` + 16 hex digits of its sha256): what
    records store as their owner."""
    return "key_" + hashlib.sha256(key.encode()).hexdigest()[:16]


def principal_of(request: Request) -> str | None:
    """A short, non-secret name for the caller's API key (None when auth is off).

    Idempotency records are scoped with it; it is a sha256 prefix, so the key never lands in
    the database.
    """
    settings: Settings = request.app.state.settings
    key = _presented_key(request)
    if not settings.api_keys or key is None:
        return None
    return key_owner(key)


def scopes_for(settings: Settings, key: str | None) -> set[Scope] | None:
    """The scopes of a presented key, or None when the key is unknown."""
    if key is None:
        return None
    for known, scopes in settings.api_keys.items():
        if hmac.compare_digest(known.encode(), key.encode()):
            return set(scopes)
    return None


def authorize(settings: Settings, key: str | None, allowed: tuple[Scope, ...]) -> Principal:
    """Check ``key`` against the configured keys and record the caller for tenant checks.

    Raises ``Unauthorized`` (401) for a missing or unknown key and ``Forbidden`` (403) for a key
    holding none of ``allowed``. Without configured keys everyone is the open tenant.
    """
    if not settings.api_keys:
        principal_var.set(OPEN)
        return OPEN
    scopes = scopes_for(settings, key)
    if key is None or scopes is None:
        raise Unauthorized("missing or unknown API key (send 'Authorization: Bearer KEY')")
    if not scopes & set(allowed):
        names = " or ".join(repr(scope.value) for scope in allowed)
        raise Forbidden(f"this API key lacks the {names} scope")
    principal = Principal(owner=key_owner(key), admin=Scope.admin in scopes)
    principal_var.set(principal)
    return principal


def require_scope(*allowed: Scope) -> Callable[[Request], Awaitable[None]]:
    """A FastAPI dependency that lets a request through only with a key holding one of
    ``allowed`` (``require_scope(Scope.reward, Scope.admin)``: either will do), and records the
    caller for tenant checks."""

    async def dependency(request: Request) -> None:
        authorize(request.app.state.settings, _presented_key(request), allowed)

    return dependency


#: Who is calling (the jobs API's name for :class:`services.core.context.Principal`).
Caller = Principal


def caller_with(*scopes: Scope) -> Callable[[Request], Awaitable[Caller]]:
    """A FastAPI dependency: the :class:`Caller`, whose key must hold one of ``scopes``."""

    async def dependency(request: Request) -> Caller:
        return authorize(request.app.state.settings, _presented_key(request), scopes)

    return dependency
