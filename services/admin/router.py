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

router = APIRouter(include_in_schema=False)


class AdminPage:
    """Marker for the component registry: the page has no state of its own."""


@router.get("/admin")
async def page() -> FileResponse:
    return FileResponse(STATIC / "admin.html", media_type="text/html; charset=utf-8")


@router.get("/admin/")
async def page_slash() -> RedirectResponse:
    return RedirectResponse("/admin", status_code=308)


@router.get("/admin/static/{name}")
async def asset(name: str) -> FileResponse:
    media_type = ASSETS.get(name)
    if media_type is None:
        raise HTTPException(status_code=404, detail="no such file")
    return FileResponse(STATIC / name, media_type=media_type, headers={"Cache-Control": "no-cache"})
