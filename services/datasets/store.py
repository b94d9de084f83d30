"""Where datasets live, and fetching, building and verifying a copy.

A fetched dataset is a folder ``<datasets dir>/<name>`` with the dataset's files and a
``MANIFEST.json`` that records where it came from and each file's SHA-256. A folder of
prepared copies (``PLAUDIT_SHARED_DATA_DIR``, ``<dir>/<name>``) is read when nothing was fetched.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from services.datasets import download
from services.datasets.builders import BUILDERS, BuildError, Progress
from services.datasets.registry import Dataset

if TYPE_CHECKING:
    from services.core.settings import CoreSettings

MANIFEST = "MANIFEST.json"


def locate(settings: CoreSettings, name: str) -> Path:
    """The folder that holds dataset ``name``: the fetched copy, else the shared copy, else the
    place a fetch would put it (missing; see :func:`missing_hint`)."""
    fetched = settings.datasets_root / name
    if (fetched / MANIFEST).is_file():
        return fetched
    if settings.shared_data_dir is not None and (settings.shared_data_dir / name).is_dir():
        return settings.shared_data_dir / name
    return fetched


def dataset_folder(settings: CoreSettings, name: str, configured: Path | None) -> Path:
    """``configured`` (a service's own data_dir setting) when set, else :func:`locate`."""
    return configured if configured is not None else locate(settings, name)


def missing_hint(name: str) -> str:
    """What to run when dataset ``name`` is missing."""
    return (
        f"fetch it with `plaudit data fetch {name}` (online), `plaudit data fetch {name} "
        f"--from PATH` (a local copy of its source) or `plaudit data fetch {name} --sample` "
        "(the small sample shipped with Plaudit)"
    )


def sample_dir(name: str) -> Path:
    """The sample of dataset ``name`` shipped in the package."""
    return Path(str(resources.files("services.datasets") / "samples" / name))


def fetch(
    dataset: Dataset,
    root: Path,
    progress: Progress,
    *,
    source: Path | None = None,
    sample: bool = False,
) -> Path:
    """Fetch ``dataset`` into ``root/<name>`` (replacing what is there) and return that folder.

    ``sample``: the shipped sample; ``source``: a local folder that holds either the built files
    (a prepared copy) or the public source; neither: download the source (needs the internet).
    """
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{dataset.name}-", dir=root) as tmp:
        work = Path(tmp) / "built"
        work.mkdir()
        origin = _fill(dataset, work, Path(tmp), progress, source=source, sample=sample)
        _write_manifest(dataset, work, origin)
        final = root / dataset.name
        if final.exists():
            shutil.rmtree(final)
        work.rename(final)
    return final


def _fill(
    dataset: Dataset,
    work: Path,
    tmp: Path,
    progress: Progress,
    *,
    source: Path | None,
    sample: bool,
) -> str:
    if sample:
        _copy_files(dataset, sample_dir(dataset.name), work, progress)
        return "sample shipped with Plaudit"
    if source is not None and all((source / f).is_file() for f in dataset.files):
        _copy_files(dataset, source, work, progress)
        return f"prepared copy ({source.name})"
    builder = BUILDERS.get(dataset.name)
    if builder is None:
        raise BuildError(
            f"building {dataset.name} from its public source is not in this version: give "
            f"--from a folder with {', '.join(dataset.files)} (a prepared copy)"
        )
    if source is None:
        source = download.source(dataset.source, tmp / "source", progress)
    builder(source, work, progress)
    return f"built from {dataset.source.describe()}"


def _copy_files(dataset: Dataset, source: Path, work: Path, progress: Progress) -> None:
    missing = [f for f in dataset.files if not (source / f).is_file()]
    if missing:
        raise BuildError(f"{source}: missing {', '.join(missing)}")
    for done, name in enumerate(dataset.files):
        progress(done, len(dataset.files), f"copying {name}")
        shutil.copyfile(source / name, work / name)
    progress(len(dataset.files), len(dataset.files), "copied")


def _write_manifest(dataset: Dataset, folder: Path, origin: str) -> None:
    manifest = {
        "name": dataset.name,
        "origin": origin,
        "source": dataset.source.describe(),
        "licence": dataset.licence,
        "sha256": {f: sha256(folder / f) for f in dataset.files},
    }
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclass(frozen=True)
class Verdict:
    """What ``plaudit data verify`` found: ``problems`` empty means the copy is intact."""

    folder: Path
    origin: str
    problems: list[str]
    reference: bool


def verify(dataset: Dataset, folder: Path) -> Verdict:
    """Every file present with the checksum its manifest (or, without one, the registry's
    reference) records; ``reference`` tells whether it is the reference build."""
    manifest_path = folder / MANIFEST
    manifest = json.loads(manifest_path.read_text()) if manifest_path.is_file() else {}
    expected = manifest.get("sha256") or dataset.reference
    problems, sums = [], {}
    for name in dataset.files:
        if not (folder / name).is_file():
            problems.append(f"{name}: missing")
            continue
        sums[name] = sha256(folder / name)
        if expected.get(name) != sums[name]:
            problems.append(f"{name}: checksum {sums[name][:12]}... differs from the recorded one")
    reference = bool(dataset.reference) and sums == dataset.reference
    origin = manifest.get("origin", "not fetched by plaudit (no manifest)")
    return Verdict(folder, origin, problems, reference)
