"""File payloads: copied whole into <data_dir>/artifacts/<kind>/<name>/<N>/ or not at all."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from services.core.errors import Conflict, InvalidInput, NotFound
from services.core.store import files as store_files
from services.core.store import rows as store_rows
from services.core.store.artifacts import ArtifactStore


def model_dir(root: Path, tag: str) -> Path:
    """A small stand-in for a trained model folder (config, weights, a nested tokenizer)."""
    root.mkdir(parents=True)
    (root / "config.json").write_text(json.dumps({"tag": tag}))
    (root / "model.safetensors").write_bytes(bytes(range(256)) * 64 + tag.encode())
    (root / "tokenizer").mkdir()
    (root / "tokenizer" / "vocab.txt").write_text("a\nb\n")
    return root


def leftovers(store: ArtifactStore) -> list[Path]:
    staging = store.root / store_files.STAGING
    return sorted(staging.iterdir()) if staging.exists() else []


async def test_a_folder_payload_is_stored_with_its_digest(
    store: ArtifactStore, tmp_path: Path
) -> None:
    source = model_dir(tmp_path / "out", "one")
    saved = await store.put("karma", "karma_model", {"base": "minilm"}, files=source)
    payload = saved.version.payload
    assert payload is not None and payload.path == "artifacts/karma_model/karma/1"
    folder = store.payload_path(saved.version)
    assert folder == store.root / "karma_model" / "karma" / "1"
    assert (folder / "tokenizer" / "vocab.txt").read_text() == "a\nb\n"
    files, size, digest = store_files.tree_digest(source)
    assert (payload.files, payload.bytes, payload.sha256) == (files, size, digest) and files == 3
    # The stored copy does not follow later changes to the source.
    (source / "config.json").write_text("{}")
    assert store_files.tree_digest(folder)[2] == digest
    assert (await store.get("karma")).payload == payload
    assert leftovers(store) == []


async def test_a_single_file_payload_and_payload_changes_in_diff(
    store: ArtifactStore, tmp_path: Path
) -> None:
    weights = tmp_path / "cal.bin"
    weights.write_bytes(b"\x00\x01" * 100)
    await store.put("uss", "simulator_calibration", {"lora": 8}, files=weights)
    weights.write_bytes(b"\x02" * 10)
    # Same content, new files: still a new version (a payload is never deduplicated).
    second = await store.put("uss", "simulator_calibration", {"lora": 8}, files=weights)
    assert second.created and second.version.version == 2
    folder = store.payload_path(second.version)
    assert folder is not None and (folder / "cal.bin").read_bytes() == b"\x02" * 10
    diff = await store.diff("uss")
    assert diff.identical and diff.payload_changed


async def test_a_failed_copy_leaves_nothing(store: ArtifactStore, tmp_path: Path) -> None:
    source = model_dir(tmp_path / "out", "broken")
    (source / "dangling").symlink_to(tmp_path / "missing-file")
    with pytest.raises(InvalidInput, match="could not be copied") as caught:
        await store.put("karma", "karma_model", {"base": "minilm"}, files=source)
    assert caught.value.param == "files"
    with pytest.raises(NotFound):
        await store.info("karma")
    assert leftovers(store) == [] and not (store.root / "karma_model").exists()
    with pytest.raises(InvalidInput, match="does not exist"):
        await store.put("karma", "karma_model", {}, files=tmp_path / "nothing-here")


async def test_a_failure_after_placing_removes_the_folder(
    store: ArtifactStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await store.put("karma", "karma_model", {"base": "minilm"})

    def broken_event(*args: Any) -> Any:
        raise RuntimeError("the process died here")

    monkeypatch.setattr(store_rows, "event_record", broken_event)
    with pytest.raises(RuntimeError):
        await store.put("karma", "karma_model", {"v": 2}, files=model_dir(tmp_path / "o", "x"))
    assert not (store.root / "karma_model" / "karma" / "2").exists()
    assert leftovers(store) == []
    assert (await store.info("karma")).latest_version == 1


async def test_an_orphan_folder_from_a_dead_writer_is_replaced(
    store: ArtifactStore, tmp_path: Path
) -> None:
    orphan = store.root / "karma_model" / "karma" / "1"
    orphan.mkdir(parents=True)
    (orphan / "half-written.bin").write_bytes(b"junk")
    saved = await store.put("karma", "karma_model", {}, files=model_dir(tmp_path / "o", "ok"))
    folder = store.payload_path(saved.version)
    assert folder == orphan and not (folder / "half-written.bin").exists()
    assert saved.version.payload is not None
    assert store_files.tree_digest(folder)[2] == saved.version.payload.sha256


async def test_racing_payload_writers_leave_only_the_winners_folder(
    store: ArtifactStore, tmp_path: Path, lockstep: Callable[[int], None]
) -> None:
    await store.put("karma", "karma_model", {"base": "minilm"})
    sources = [model_dir(tmp_path / f"run{i}", f"run{i}") for i in range(4)]
    lockstep(4)
    results = await asyncio.gather(
        *(
            store.put("karma", "karma_model", {"run": i}, files=src, expected_version=1)
            for i, src in enumerate(sources)
        ),
        return_exceptions=True,
    )
    saved = [r for r in results if not isinstance(r, BaseException)]
    assert len(saved) == 1 and sum(isinstance(r, Conflict) for r in results) == 3
    winner = saved[0].version
    folders = sorted(p.name for p in (store.root / "karma_model" / "karma").iterdir())
    assert folders == ["2"] and leftovers(store) == []
    folder = store.payload_path(winner)
    assert folder is not None
    config = json.loads((folder / "config.json").read_text())
    assert config == {"tag": f"run{winner.content['run']}"}
