"""The app factory that ``plaudit serve --workers N`` hands to uvicorn's worker processes.

uvicorn starts each worker afresh, so the logging that ``plaudit serve`` configured in the
parent is not there; this factory configures it from the settings, then builds the service's
app with the factory the parent named in ``_PLAUDIT_SERVE_FACTORY`` (``module:function``).
"""

from __future__ import annotations

import importlib
import os
from typing import Any

FACTORY_VAR = "_PLAUDIT_SERVE_FACTORY"


def create_app() -> Any:
    """Configure logging, then build the app the parent process chose."""
    from services.core.context import configure_logging
    from services.core.heap import freeze_in_this_process
    from services.core.settings import CoreSettings

    configure_logging(CoreSettings().log_level)
    freeze_in_this_process()
    module, _, name = os.environ[FACTORY_VAR].partition(":")
    return getattr(importlib.import_module(module), name)()
