"""The admin page as a component: ``/admin`` and its three static files.

The page is plain HTML, CSS and JavaScript read from this folder; everything it shows comes from
the JSON API (``/v1/memory/...`` and ``/v1/rubrics/...``) with the key the person types in, so the
page itself needs no scope and holds no data.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from services.admin.router import AdminPage, router
from services.core.components import Component
from services.core.resources import Resources
from services.core.settings import CoreSettings
from services.core.web.app_factory import build_app


def component() -> Component:
    def build(resources: Resources) -> AdminPage:
        return AdminPage()

    return Component(name="admin", router=router, provides=AdminPage, build=build)


def create_app(settings: CoreSettings | None = None, **collaborators: Any) -> FastAPI:
    return build_app([component()], settings, title="Plaudit admin", **collaborators)
