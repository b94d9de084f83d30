"""The shared kit of the services (it imports no service: tests/architecture).

Importing it puts the server's default request limits in force for this process, so request
models check sizes outside a request too (jobs, in-process calls); a client process that
imports only :mod:`plaudit_wire` checks none (:mod:`plaudit_wire.limits`).
"""

from services.core.web import limits as _limits  # noqa: F401
