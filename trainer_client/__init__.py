"""Plaudit's light trainer client (httpx and pydantic only: no torch, no FastAPI).

The reward adapters for TRL, verl, OpenRLHF and slime, and the sync/async HTTP clients, are
tracked in the trainer-side issue; until then call the REST API directly (see README.md).
"""

__all__: list[str] = []
