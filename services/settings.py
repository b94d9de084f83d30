"""The settings of this build: :class:`~services.core.settings.CoreSettings` with the section
of every service that ``services/app.py`` lists (issue 20: one list of services).

Entry points (the ``plaudit`` commands, tests, benchmarks) read settings here; a service's
own code takes a ``CoreSettings`` and reads its section with ``JudgeSettings.of(settings)``.
Nothing is read at import: call :func:`get_settings` when a process starts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from services.core.components import settings_sections
from services.core.settings import CoreSettings, compose_settings

if TYPE_CHECKING:
    # The type checker sees the shared fields; sections are read through Section.of.
    Settings = CoreSettings
else:
    from services.app import components

    Settings = compose_settings(settings_sections(components()))


def get_settings() -> CoreSettings:
    """Read settings from the environment now (never cached at import)."""
    return Settings()
