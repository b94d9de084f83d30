"""Routes of the admin page: the page and its assets, outside the OpenAPI schema."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, HTTPException
from fastapi.responses import FileResponse, RedirectResponse

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

router = APIRouter(include_in_schema=False)


class AdminPage:
    """Marker for the component registry: the page has no state of its own."""


@router.get("/admin")
async def page() -> FileResponse:
    return FileResponse(
        STATIC / "admin.html", media_type="text/html; charset=utf-8", headers=SECURITY_HEADERS
    )


@router.get("/admin/")
async def page_slash() -> RedirectResponse:
    return RedirectResponse("/admin", status_code=308)


@router.get("/admin/static/{name}")
async def asset(name: str) -> FileResponse:
    media_type = ASSETS.get(name)
    if media_type is None:
        raise HTTPException(status_code=404, detail="no such file")
    headers = {**SECURITY_HEADERS, "Cache-Control": "no-cache"}
    return FileResponse(STATIC / name, media_type=media_type, headers=headers)
