"""API keys with scopes. With no keys configured the server is open, to loopback callers only.

Keys are checked twice: by :func:`refuse_caller` in the guard middleware, once the request is
routed and before its body is read (issue 9: a 31 MB body was parsed before its 401), and by the
:func:`require_scope` dependency of each router (which also covers routes without a body).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
from collections.abc import Awaitable, Callable

from fastapi import Request
from fastapi.dependencies.models import Dependant
from starlette.requests import HTTPConnection

from services.core.context import OPEN, Principal, principal_var
from services.core.errors import Forbidden, InvalidInput, PlauditError, Unauthorized
from services.core.settings import CoreSettings, Scope, is_loopback
from services.core.settings_check import warn_unknown

log = logging.getLogger(__name__)

#: Which scopes a route accepts (any one of them will do), read from settings; None: open.
ScopeRule = Callable[[CoreSettings], tuple[Scope, ...] | None]
_RULE = "plaudit_scope_rule"


def check_bind_allowed(settings: CoreSettings, host: str) -> None:
    """Refuse a non-loopback bind without API keys, or with a key shorter than the minimum."""
    if is_loopback(host):
        return
    if not settings.api_keys:
        raise InvalidInput(
            f"refusing to listen on {host!r} without API keys: set PLAUDIT_API_KEYS "
            '(for example \'{"my-secret-key": ["reward", "admin"]}\') or bind to 127.0.0.1',
            param="host",
        )
    if placeholder_keys(settings):
        raise InvalidInput(
            f"refusing to listen on {host!r}: {len(placeholder_keys(settings))} API key(s) look "
            "like placeholders from an example (change-me..., replace-with..., <...>); set "
            "PLAUDIT_API_KEYS to long random keys (e.g. `openssl rand -hex 24`)",
            param="api_keys",
        )
    if short_keys(settings):
        raise InvalidInput(
            f"refusing to listen on {host!r}: {len(short_keys(settings))} API key(s) are "
            f"shorter than {settings.security.min_key_chars} characters "
            "(PLAUDIT_SECURITY_MIN_KEY_CHARS); use long random keys",
            param="api_keys",
        )


#: What the keys of examples and templates look like (issue 21: ``change-me-trainer-key`` passed
#: the length check, so a server started on 0.0.0.0 with the example's key unchanged).
PLACEHOLDER = re.compile(
    r"change.?me|replace.?(with|me)|placeholder|your.?(api.?)?key|<[^>]*>|example|^x{4,}|todo",
    re.IGNORECASE,
)


def placeholder_keys(settings: CoreSettings) -> list[str]:
    """The configured keys that look like an example's placeholder."""
    return [k for k in settings.api_keys if PLACEHOLDER.search(k)]


def short_keys(settings: CoreSettings) -> list[str]:
    """The configured keys shorter than ``security.min_key_chars``."""
    return [k for k in settings.api_keys if len(k) < settings.security.min_key_chars]


def check_startup(settings: CoreSettings) -> None:
    """Run in the app's lifespan, so every way of starting the app is covered (not only the
    ``plaudit`` command): refuses a non-loopback ``host`` without keys, warns of short keys."""
    check_bind_allowed(settings, settings.host)
    warn_unknown(type(settings))
    if short_keys(settings):
        log.warning(
            "%d API key(s) are shorter than %d characters: they are accepted from loopback "
            "callers only",
            len(short_keys(settings)),
            settings.security.min_key_chars,
        )


def presented_key(connection: HTTPConnection) -> str | None:
    """The key sent as ``Authorization: Bearer KEY`` or ``X-API-Key: KEY``."""
    auth = connection.headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip()
    return connection.headers.get("x-api-key")


_presented_key = presented_key


def key_owner(key: str) -> str:
    """A stable, non-secret id of an API key (``key_`` + 16 hex digits of its sha256): what
    records store as their owner."""
    return "key_" + hashlib.sha256(key.encode()).hexdigest()[:16]


def principal_of(request: Request) -> str | None:
    """The owner id of the caller's API key (None when auth is off).

    Idempotency records are scoped with it; it is a hash, so the key never lands in the database.
    """
    settings: CoreSettings = request.app.state.settings
    key = presented_key(request)
    if not settings.api_keys or key is None:
        return None
    return key_owner(key)


def scopes_for(settings: CoreSettings, key: str | None) -> set[Scope] | None:
    """The scopes of a presented key, or None when the key is unknown."""
    if key is None:
        return None
    for known, scopes in settings.api_keys.items():
        if hmac.compare_digest(known.encode(), key.encode()):
            return set(scopes)
    return None


def refuse_open_server(connection: HTTPConnection, settings: CoreSettings) -> PlauditError | None:
    """A server without keys answers loopback callers only, however it was started."""
    if settings.api_keys or _from_loopback(connection):
        return None
    return Forbidden(
        "this server has no API keys and answers loopback callers only: "
        "set PLAUDIT_API_KEYS to serve other hosts"
    )


def refuse_caller(connection: HTTPConnection, settings: CoreSettings) -> PlauditError | None:
    """Why this caller may not use the route it was routed to (None: it may).

    Reads headers and the matched route only, so it can run before the body is read.
    """
    route = connection.scope.get("route")
    dependant = getattr(route, "dependant", None)
    rule = _find_rule(dependant) if isinstance(dependant, Dependant) else None
    needed = rule(settings) if rule is not None else None
    if not settings.api_keys or needed is None:
        return None
    return _check_key(presented_key(connection), needed, settings, _from_loopback(connection))


def _from_loopback(connection: HTTPConnection) -> bool:
    return connection.client is None or is_loopback(connection.client.host)


def _check_key(
    key: str | None, needed: tuple[Scope, ...], settings: CoreSettings, from_loopback: bool
) -> PlauditError | None:
    scopes = scopes_for(settings, key)
    if key is None or scopes is None:
        return Unauthorized("missing or unknown API key (send 'Authorization: Bearer KEY')")
    if not from_loopback and len(key) < settings.security.min_key_chars:
        return Unauthorized(
            f"this API key is shorter than {settings.security.min_key_chars} characters and "
            "is accepted from loopback callers only"
        )
    if not scopes & set(needed):
        names = " or ".join(repr(scope.value) for scope in needed)
        return Forbidden(f"this API key lacks the {names} scope")
    return None


def authorize(
    settings: CoreSettings, key: str | None, allowed: tuple[Scope, ...], from_loopback: bool = True
) -> Principal:
    """Check ``key`` and record the caller for tenant checks (see ``services.core.context``).

    Raises ``Unauthorized`` (401) for a missing, unknown or (beyond loopback) too short key and
    ``Forbidden`` (403) for a key holding none of ``allowed``. Without configured keys everyone
    is the open tenant.
    """
    if not settings.api_keys:
        principal_var.set(OPEN)
        return OPEN
    error = _check_key(key, allowed, settings, from_loopback)
    if error is not None:
        raise error
    assert key is not None
    scopes = scopes_for(settings, key) or set()
    principal = Principal(owner=key_owner(key), admin=Scope.admin in scopes)
    principal_var.set(principal)
    return principal


def require_scope(*allowed: Scope) -> Callable[[Request], Awaitable[None]]:
    """A FastAPI dependency that lets a request through only with a key holding one of
    ``allowed`` (``require_scope(Scope.reward, Scope.admin)``: either will do)."""
    return scope_dependency(lambda _: allowed)


def scope_dependency(rule: ScopeRule) -> Callable[[Request], Awaitable[None]]:
    """A dependency requiring a scope that ``rule`` reads from settings (None: open)."""

    async def dependency(request: Request) -> None:
        settings: CoreSettings = request.app.state.settings
        needed = rule(settings)
        if needed is None:
            principal_var.set(OPEN)
            return
        authorize(settings, presented_key(request), needed, _from_loopback(request))

    setattr(dependency, _RULE, rule)
    return dependency


#: Who is calling (the jobs API's name for :class:`services.core.context.Principal`).
Caller = Principal


def caller_with(*scopes: Scope) -> Callable[[Request], Awaitable[Caller]]:
    """A FastAPI dependency: the :class:`Caller`, whose key must hold one of ``scopes``."""

    async def dependency(request: Request) -> Caller:
        settings: CoreSettings = request.app.state.settings
        return authorize(settings, presented_key(request), scopes, _from_loopback(request))

    setattr(dependency, _RULE, lambda _: scopes)
    return dependency


def _find_rule(dependant: Dependant) -> ScopeRule | None:
    for sub in dependant.dependencies:
        rule = getattr(sub.call, _RULE, None)
        if rule is not None:
            return rule  # type: ignore[no-any-return]
        found = _find_rule(sub)
        if found is not None:
            return found
    return None
