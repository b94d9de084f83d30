"""What scoring learns from the memory without waiting for it: an in-process view (no I/O).

The ingest consumer and the revision job keep it up to date: each run's latest per-criterion
pass rates (for focal aggregation), each rubric's latest version, and for each version the
memory made, the step of the evidence it was made from. The rubric channel reads it on the
scoring path, so a stamp costs a dictionary lookup.

``staleness`` = the scored group's step - the step of the evidence behind the version that
scored it: how many steps the rubric lags the run. It is null for a version the memory did
not make (the rubric as written, or a version from another run).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class Stamps:
    def __init__(self) -> None:
        self._rates: dict[tuple[str, str], dict[str, float]] = {}
        self._latest: dict[str, int] = {}
        self._evidence: dict[tuple[str, int], tuple[str, int]] = {}

    def pass_rates(self, run_id: str, rubric_id: str) -> Mapping[str, float] | None:
        return self._rates.get((run_id, rubric_id))

    def set_rates(self, run_id: str, rubric_id: str, rates: Mapping[str, float | None]) -> None:
        self._rates[(run_id, rubric_id)] = {k: v for k, v in rates.items() if v is not None}

    def saw_version(self, rubric_id: str, version: int) -> None:
        self._latest[rubric_id] = max(version, self._latest.get(rubric_id, 0))

    def made_version(self, rubric_id: str, version: int, run_id: str, step: int) -> None:
        """``version`` was made by the memory of ``run_id`` from the evidence of ``step``."""
        self._evidence[(rubric_id, version)] = (run_id, step)
        self.saw_version(rubric_id, version)

    def stamp(self, run_id: str, rubric_id: str, version: int, step: int) -> dict[str, Any]:
        self.saw_version(rubric_id, version)
        made = self._evidence.get((rubric_id, version))
        evidence = made[1] if made is not None and made[0] == run_id else None
        return {
            "rubric_version": version,
            "latest_version": self._latest[rubric_id],
            "evidence_step": evidence,
            "staleness": None if evidence is None else max(0, step - evidence),
        }
