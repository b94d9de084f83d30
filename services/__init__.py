"""Plaudit's HTTP services and their shared core."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("plaudit")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0+unknown"
