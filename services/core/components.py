"""A service's pieces as the app factory sees them: a router and a way to build its service."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter

from services.core.resources import Resources


@dataclass(frozen=True)
class Component:
    """One service: its name, its router, and a builder run in the lifespan."""

    name: str
    router: APIRouter
    build: Callable[[Resources], Any]
    needs_embedder: bool = False
