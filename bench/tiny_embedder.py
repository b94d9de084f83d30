"""A tiny random sentence-transformers model, for overhead benchmarks on a machine without the
bundled all-MiniLM-L6-v2 (``PLAUDIT_EMBEDDER_MODEL=<dir>``). Its vectors mean nothing: use it
only where no measured route embeds text (the judge and rewards routes of
:mod:`bench.bench_overhead` do not).

Run: ``python -m bench.tiny_embedder /tmp/tiny-embedder``.
"""

from __future__ import annotations

import string
import sys
from pathlib import Path


def make(folder: Path) -> Path:
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.models import Pooling, Transformer
    from transformers.models.bert import BertConfig, BertModel, BertTokenizer

    raw = folder / "transformer"
    raw.mkdir(parents=True, exist_ok=True)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *string.ascii_lowercase, *string.digits]
    (raw / "vocab.txt").write_text("\n".join(vocab) + "\n")
    BertTokenizer(vocab_file=str(raw / "vocab.txt")).save_pretrained(raw)
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
    )
    BertModel(config).save_pretrained(raw)
    encoder = Transformer(str(raw))
    pooling = Pooling(encoder.get_word_embedding_dimension())
    SentenceTransformer(modules=[encoder, pooling]).save(str(folder / "model"))
    return folder / "model"


if __name__ == "__main__":
    print(make(Path(sys.argv[1])))
