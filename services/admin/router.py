"""Routes of the admin page: the page, its assets and the site icon (outside the OpenAPI
schema), and ``GET /v1/auth/me``, which says whom a key stands for (in it)."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import FileResponse, RedirectResponse
from pydantic import BaseModel, Field

from services.core.context import current_principal
from services.core.settings import CoreSettings, Scope
from services.core.web.auth import presented_key, require_scope, scopes_for

STATIC = Path(__file__).parent / "static"
#: the only files served, with their media types (no directory listing, no path from the URL)
ASSETS = {
    "admin.css": "text/css; charset=utf-8",
    "admin.js": "text/javascript; charset=utf-8",
}

#: Sent with the page and its assets (issue 23): only this origin's script, styles and API
#: calls; no framing (clickjacking), no inline script, no forms posted elsewhere.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}

router = APIRouter()


class AdminPage:
    """Marker for the component registry: the page has no state of its own."""


class Me(BaseModel):
    """Whom the presented key stands for: its owner id (never the key) and its scopes."""

    owner: str | None = Field(description="the key's owner id; null when the server has no keys")
    scopes: list[Scope] = Field(description="what the key may do")
    keys_configured: bool = Field(description="whether the server checks API keys at all")


@router.get("/admin", include_in_schema=False)
async def page() -> FileResponse:
    return FileResponse(
        STATIC / "admin.html", media_type="text/html; charset=utf-8", headers=SECURITY_HEADERS
    )


@router.get("/admin/", include_in_schema=False)
async def page_slash() -> RedirectResponse:
    return RedirectResponse("/admin", status_code=308)


@router.get("/admin/static/{name}", include_in_schema=False)
async def asset(name: str) -> FileResponse:
    media_type = ASSETS.get(name)
    if media_type is None:
        raise HTTPException(status_code=404, detail="no such file")
    headers = {**SECURITY_HEADERS, "Cache-Control": "no-cache"}
    return FileResponse(STATIC / name, media_type=media_type, headers=headers)


@router.get("/favicon.ico", include_in_schema=False)
async def favicon() -> FileResponse:
    """The site icon (an SVG, which browsers take at this path too)."""
    return FileResponse(
        STATIC / "favicon.svg",
        media_type="image/svg+xml",
        headers={"Cache-Control": "public, max-age=86400"},
    )


@router.get(
    "/v1/auth/me",
    tags=["auth"],
    dependencies=[Depends(require_scope(Scope.reward, Scope.admin))],
)
async def me(request: Request) -> Me:
    """Whom the presented key stands for (the admin page shows it as who is signed in)."""
    settings: CoreSettings = request.app.state.settings
    principal = current_principal()
    if not settings.api_keys:
        return Me(owner=None, scopes=list(Scope), keys_configured=False)
    scopes = scopes_for(settings, presented_key(request)) or set()
    return Me(owner=principal.owner, scopes=sorted(scopes), keys_configured=True)
