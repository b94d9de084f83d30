"""The package metadata builds without setuptools' licence warnings (issue 21: the install log
was full of "`project.license` as a TOML table is deprecated")."""

from __future__ import annotations

import warnings
from pathlib import Path

from setuptools.config.pyprojecttoml import apply_configuration
from setuptools.dist import Distribution

ROOT = Path(__file__).resolve().parents[2]


def test_pyproject_applies_without_licence_warnings() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dist = apply_configuration(Distribution(), ROOT / "pyproject.toml")
    licence = [str(w.message).splitlines()[0] for w in caught if "licen" in str(w.message).lower()]
    assert licence == []
    assert dist.metadata.license_expression == "Apache-2.0"
