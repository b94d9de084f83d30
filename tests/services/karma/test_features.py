"""The variants' inputs and the token layout, with the real MiniLM tokenizer."""

from __future__ import annotations

import pytest
from transformers import AutoTokenizer

from services.karma.encoding import PairEncoder
from services.karma.features import KarmaInput, header
from services.karma.training import bundled_model_path

META = {"age": "3h", "depth": "1", "subreddit": "College", "flair": "advice", "created": "9"}


@pytest.fixture(scope="module")
def tokenizer() -> object:
    return AutoTokenizer.from_pretrained(bundled_model_path())


def test_headers_hide_order_fields_when_order_blind() -> None:
    assert header("context_only", META, order_blind=False) == ""
    shown = header("with_metadata", META, order_blind=False)
    assert shown == "subreddit: College | depth: 1 | age: 3h | created: 9 | flair: advice"
    blind = header("with_metadata", META, order_blind=True)
    assert blind == "subreddit: College | depth: 1 | flair: advice"


def test_layout_keeps_the_reply_and_the_end_of_the_context(tokenizer: object) -> None:
    encoder = PairEncoder(tokenizer, "context_only", max_length=32, min_context=8)
    context = " ".join(f"w{i}" for i in range(60)) + " latest turn"
    [long_context] = encoder.encode([KarmaInput(context, "a short reply")], order_blind=True)
    text = encoder.tokenizer.decode(long_context.input_ids)
    assert len(long_context.input_ids) == 32
    assert text.startswith("[CLS]") and text.endswith("latest turn [SEP] a short reply [SEP]")
    assert "w0 " not in text  # the context lost its beginning
    types = long_context.token_type_ids
    assert (
        types is not None and types.count(1) == len(encoder.tokenizer.tokenize("a short reply")) + 1
    )


def test_a_long_reply_leaves_min_context_tokens(tokenizer: object) -> None:
    encoder = PairEncoder(tokenizer, "context_only", max_length=32, min_context=8)
    reply = " ".join(["word"] * 100)
    context = " ".join(["ctx"] * 100)
    [item] = encoder.encode([KarmaInput(context, reply)], order_blind=True)
    ids = item.input_ids
    assert len(ids) == 32
    first_sep = ids.index(encoder.sep)
    assert first_sep == 1 + 8  # [CLS] + the eight context tokens kept


def test_context_head_keeps_the_first_tokens_too(tokenizer: object) -> None:
    encoder = PairEncoder(tokenizer, "context_only", max_length=32, context_head=4)
    context = "title words here now " + " ".join(f"w{i}" for i in range(60)) + " latest turn"
    [item] = encoder.encode([KarmaInput(context, "reply")], order_blind=True)
    text = encoder.tokenizer.decode(item.input_ids)
    assert text.startswith("[CLS] title words here now w")
    assert "latest turn [SEP] reply [SEP]" in text and len(item.input_ids) == 32


def test_with_metadata_reads_the_header_first(tokenizer: object) -> None:
    encoder = PairEncoder(tokenizer, "with_metadata", max_length=64)
    item = KarmaInput("why?", "because", META)
    [blind] = encoder.encode([item], order_blind=True)
    [full] = encoder.encode([item], order_blind=False)
    assert encoder.tokenizer.decode(blind.input_ids).startswith("[CLS] subreddit : college | depth")
    assert "age" not in encoder.tokenizer.decode(blind.input_ids)
    assert "age : 3h" in encoder.tokenizer.decode(full.input_ids)
