"""GGUF -> safetensors conversion: the real SmolLM2 checkpoint and the atomic cache."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")

from judges.backends import convert


@pytest.mark.slow
def test_conversion_writes_a_complete_vllm_ready_checkpoint(smollm2_dir: Path) -> None:
    config = json.loads((smollm2_dir / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"]
    assert "quantization_config" not in config
    assert config["tie_word_embeddings"] is True
    for name in (
        "model.safetensors",
        "tokenizer.json",
        "generation_config.json",
        convert.MARKER_FILE,
    ):
        assert (smollm2_dir / name).is_file(), name
    assert convert.is_valid_conversion(smollm2_dir)
    assert not list(smollm2_dir.parent.glob(".tmp-*")), "temporary conversion dir left behind"


@pytest.mark.slow
def test_tied_embedding_key_is_written_explicitly(smollm2_dir: Path) -> None:
    from safetensors import safe_open

    with safe_open(str(smollm2_dir / "model.safetensors"), framework="pt") as weights:
        keys = set(weights.keys())
        embedding = weights.get_tensor("model.embed_tokens.weight")
    assert "model.embed_tokens.weight" in keys
    assert tuple(embedding.shape) == (49152, 576)
    assert float(embedding.std()) > 0.01  # real weights, not an initialised placeholder


@pytest.mark.slow
def test_cached_conversion_is_reused(
    smollm2_dir: Path, model_cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker_before = convert.read_marker(smollm2_dir)
    weights_stat = (smollm2_dir / "model.safetensors").stat()

    def must_not_convert(*args: object) -> None:
        raise AssertionError("the cached conversion should have been reused")

    monkeypatch.setattr(convert, "write_checkpoint_from_gguf", must_not_convert)
    assert convert.resolve_model_dir(None, model_cache_dir) == smollm2_dir
    assert convert.read_marker(smollm2_dir) == marker_before
    after = (smollm2_dir / "model.safetensors").stat()
    assert (after.st_ino, after.st_mtime_ns) == (weights_stat.st_ino, weights_stat.st_mtime_ns)


# -- the cache mechanics, without a model -------------------------------------------


def test_atomic_directory_publishes_on_success(tmp_path: Path) -> None:
    final = tmp_path / "model"
    with convert.atomic_directory(final) as tmp:
        (tmp / "weights").write_text("w")
        assert not final.exists()
    assert (final / "weights").read_text() == "w"
    assert list(tmp_path.iterdir()) == [final]


def test_atomic_directory_leaves_nothing_after_a_crash(tmp_path: Path) -> None:
    final = tmp_path / "model"
    with pytest.raises(RuntimeError), convert.atomic_directory(final) as tmp:
        (tmp / "half-written").write_text("x")
        raise RuntimeError("killed mid-conversion")
    assert list(tmp_path.iterdir()) == []


def test_atomic_directory_keeps_the_copy_published_first(tmp_path: Path) -> None:
    final = tmp_path / "model"
    with convert.atomic_directory(final) as tmp:
        (tmp / "mine").write_text("late")
        final.mkdir()
        (final / "theirs").write_text("first")
    assert [p.name for p in final.iterdir()] == ["theirs"]
    assert list(tmp_path.iterdir()) == [final]


def test_incomplete_cache_entry_is_rebuilt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gguf = tmp_path / "tiny.gguf"
    gguf.write_bytes(b"not really gguf")
    stale = tmp_path / "cache" / f"tiny-{convert.file_sha256(gguf)[:16]}"
    stale.mkdir(parents=True)
    (stale / "config.json").write_text("{}")  # no marker: a copy from before the rename

    def fake_convert(source: Path, out_dir: Path) -> None:
        (out_dir / "config.json").write_text('{"architectures": ["LlamaForCausalLM"]}')

    monkeypatch.setattr(convert, "write_checkpoint_from_gguf", fake_convert)
    result = convert.resolve_model_dir(gguf, tmp_path / "cache")
    assert result == stale
    assert convert.is_valid_conversion(result)
    assert convert.read_marker(result)["source_sha256"] == convert.file_sha256(gguf)


def test_resolve_rejects_what_is_not_a_model(tmp_path: Path) -> None:
    with pytest.raises(convert.ModelNotFoundError):
        convert.resolve_model_dir(tmp_path / "missing.gguf", tmp_path)
    with pytest.raises(convert.ModelNotFoundError):
        convert.resolve_model_dir(tmp_path, tmp_path)  # a directory without config.json


def test_resolve_uses_a_hf_directory_as_is(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    assert convert.resolve_model_dir(tmp_path) == tmp_path


def test_weights_of_tied_models_keep_only_the_embedding(tmp_path: Path) -> None:
    import torch
    from safetensors.torch import load_file

    shared = torch.randn(8, 4)
    convert.write_weights(
        {
            "model.embed_tokens.weight": shared,
            "lm_head.weight": shared,
            "model.norm.weight": torch.ones(4),
        },
        tmp_path / "a.safetensors",
        tied=True,
    )
    assert set(load_file(str(tmp_path / "a.safetensors"))) == {
        "model.embed_tokens.weight",
        "model.norm.weight",
    }
    # A loader that exposes only the output head: the embedding key is still written.
    convert.write_weights({"lm_head.weight": shared}, tmp_path / "b.safetensors", tied=True)
    loaded = load_file(str(tmp_path / "b.safetensors"))
    assert set(loaded) == {"model.embed_tokens.weight"}
    assert torch.equal(loaded["model.embed_tokens.weight"], shared)


def test_checkpoint_config_drops_quantization() -> None:
    raw = {
        "quantization_config": {"quant_method": "gguf"},
        "_name_or_path": "x",
        "tie_word_embeddings": True,
    }
    config = convert.checkpoint_config(raw, "LlamaForCausalLM")
    assert config == {
        "architectures": ["LlamaForCausalLM"],
        "dtype": "float32",
        "tie_word_embeddings": True,
    }
    assert json.loads(json.dumps(config)) == config
