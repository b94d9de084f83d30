"""Which ``PLAUDIT_`` variables Plaudit knows, and a warning for the others (issue 21).

pydantic-settings ignores an unknown variable (``extra="ignore"``), so a misspelt or renamed one
(``PLAUDIT_PROTOCOL_*`` became ``PLAUDIT_PROTOCOLS_*``) silently changed nothing. At start each
unknown one is logged with the closest known name.
"""

from __future__ import annotations

import difflib
import logging
import os
from collections.abc import Iterable, Mapping

from pydantic import BaseModel

from services.core.settings import CoreSettings

log = logging.getLogger("plaudit.settings")

#: Read by the trainer client, trainer adapters and commands, not by a server's settings.
CLIENT_VARIABLES = frozenset(
    {
        "PLAUDIT_API_KEY",
        "PLAUDIT_URL",
        "PLAUDIT_TIMEOUT",
        "PLAUDIT_RUN_ID",
        "PLAUDIT_REWARD_SPEC",
        "PLAUDIT_PROMPT_KEY",
        "PLAUDIT_LABEL_COLUMN",
        "PLAUDIT_VERL_ON_FAILURE",
        "PLAUDIT_OPENRLHF_WHOLE_GROUPS",
        "PLAUDIT_SIMULATOR_CALIBRATION",
        "PLAUDIT_SIMULATOR_MAX_TURNS",
        "PLAUDIT_SIMULATOR_TEMPERATURE",
        "PLAUDIT_SIMULATOR_USER_TEMPLATE",
    }
)

#: The test suite's own variables (tests/conftest.py, tests/shared_data.py).
TESTS = "PLAUDIT_TEST_"

#: Old prefixes and what they are called now.
RENAMED = {"PLAUDIT_PROTOCOL_": "PLAUDIT_PROTOCOLS_"}


def settings_variables(settings: type[CoreSettings]) -> set[str]:
    """Every variable ``settings`` reads: PLAUDIT_<FIELD>, PLAUDIT_<SECTION>_<FIELD>."""
    names = set()
    for name, field in settings.model_fields.items():
        section = field.annotation
        if isinstance(section, type) and issubclass(section, BaseModel):
            # a model role's flat spellings too (PLAUDIT_MEMORY_LLM_BASE_URL, issue 19)
            folded: frozenset[str] = getattr(section, "folded_keys", frozenset)()
            subs = {*section.model_fields, *folded}
            names |= {f"PLAUDIT_{name}_{sub}".upper() for sub in subs}
        else:
            names.add(f"PLAUDIT_{name.upper()}")
    return names


def known_variables(settings: type[CoreSettings]) -> set[str]:
    """The variables of ``settings`` and the client's."""
    return settings_variables(settings) | CLIENT_VARIABLES


def closest(name: str, known: Iterable[str]) -> str | None:
    """The known name ``name`` most likely meant (a renamed prefix first), or None."""
    pool = sorted(known)
    for old, new in RENAMED.items():
        if name.startswith(old) and new + name[len(old) :] in pool:
            return new + name[len(old) :]
    matches = difflib.get_close_matches(name, pool, n=1, cutoff=0.75)
    return matches[0] if matches else None


def unknown_variables(
    environ: Mapping[str, str], settings: type[CoreSettings]
) -> dict[str, str | None]:
    """``PLAUDIT_`` names in ``environ`` that neither ``settings`` nor the client reads -> the
    closest known name."""
    known = known_variables(settings)
    return {
        name: closest(name, known)
        for name in sorted(environ)
        if name.startswith("PLAUDIT_")
        and not name.startswith("PLAUDIT_TEST_")
        and name not in known
    }


def warn_unknown(
    settings: type[CoreSettings], environ: Mapping[str, str] | None = None
) -> dict[str, str | None]:
    """Log a warning for each ``PLAUDIT_`` variable that ``settings`` does not read; returns
    them."""
    unknown = unknown_variables(os.environ if environ is None else environ, settings)
    for name, guess in unknown.items():
        hint = f"; did you mean {guess}?" if guess else ""
        log.warning("%s is not a Plaudit setting and is ignored%s", name, hint)
    return unknown
