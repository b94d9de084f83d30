"""Pages a person opens in a browser: the landing page at ``/`` and the API docs, served
offline (Swagger UI and ReDoc assets come from the installed ``fastapi-offline`` package, not a
CDN)."""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path

import fastapi_offline
from fastapi import APIRouter, FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

import services
from services.core.components import Component
from services.core.settings import CoreSettings

ASSETS = Path(fastapi_offline.__file__).parent / "static"
ASSETS_URL = "/static/docs"

router = APIRouter(include_in_schema=False)


def mount_pages(app: FastAPI, components: Sequence[Component]) -> None:
    """Serve ``/``, ``/docs`` and ``/redoc`` on ``app`` (build it with docs_url=None)."""
    app.mount(ASSETS_URL, StaticFiles(directory=ASSETS), name="docs-assets")
    app.state.service_names = [c.name for c in components]
    app.state.landing_rows = [c.landing for c in components if c.landing is not None]
    app.include_router(router)


@router.get("/docs")
async def swagger(request: Request) -> HTMLResponse:
    return get_swagger_ui_html(
        openapi_url=request.app.openapi_url,
        title=f"{request.app.title} API",
        swagger_js_url=f"{ASSETS_URL}/swagger-ui-bundle.js",
        swagger_css_url=f"{ASSETS_URL}/swagger-ui.css",
        swagger_favicon_url=f"{ASSETS_URL}/favicon.png",
    )


@router.get("/redoc")
async def redoc(request: Request) -> HTMLResponse:
    return get_redoc_html(
        openapi_url=request.app.openapi_url,
        title=f"{request.app.title} API",
        redoc_js_url=f"{ASSETS_URL}/redoc.standalone.js",
        redoc_favicon_url=f"{ASSETS_URL}/favicon.png",
        with_google_fonts=False,
    )


@router.get("/")
async def landing(request: Request) -> HTMLResponse:
    """What this server is: version, services, the judge it asks, and where to go next."""
    settings: CoreSettings = request.app.state.settings
    served: list[str] = request.app.state.service_names
    described = [row for rows_of in request.app.state.landing_rows for row in rows_of(settings)]
    rows = [
        ("version", services.__version__),
        ("services", ", ".join(served)),
        *described,
        ("storage", "embedded SQLite" if settings.database_url is None else "database URL set"),
        ("cache and jobs", "in-process" if settings.embedded else "Redis"),
    ]
    table = "".join(
        f"<tr><th>{html.escape(k)}</th><td>{html.escape(str(v))}</td></tr>" for k, v in rows
    )
    links = " · ".join(
        f'<a href="{href}">{label}</a>'
        for href, label in (
            *([("/admin", "admin page (evaluation memory)")] if "admin" in served else []),
            ("/docs", "API docs (Swagger UI)"),
            ("/redoc", "API reference (ReDoc)"),
            ("/openapi.json", "OpenAPI schema"),
            ("/health/ready", "readiness"),
            ("/metrics", "metrics"),
        )
    )
    body = (
        f"<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>{html.escape(request.app.title)}</title>"
        "<link rel='icon' href='/favicon.ico' type='image/svg+xml'>"
        "<style>body{font-family:system-ui,sans-serif;max-width:46rem;margin:3rem auto;"
        "padding:0 1rem}th{text-align:left;padding-right:1rem}td,th{padding:.2rem 0}</style>"
        f"</head><body><h1>{html.escape(request.app.title)}</h1>"
        "<p>Reward-model and judge services for RL post-training.</p>"
        f"<table id='about'>{table}</table><p>{links}</p></body></html>"
    )
    return HTMLResponse(body)
