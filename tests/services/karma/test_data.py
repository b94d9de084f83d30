"""Loading KARMA data: the user's JSONL (scored replies or pairs), its errors, the shared format."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from services.karma.data import (
    KarmaDataError,
    load_data,
    load_jsonl,
    load_reddit_karma,
    prefers,
)

FIXTURES = Path(__file__).parent / "fixtures"


def test_scored_rows_become_sibling_pairs_by_the_shp_rule() -> None:
    data = load_jsonl(FIXTURES / "scored.jsonl")
    assert len(data.replies) == 5
    found = {(p.preferred.text[:5], p.other.text[:5]) for p in data.pairs}
    # 3 vs 1 qualifies by score but the preferred was posted first: the SHP rule drops it.
    assert found == {("A pow", "Snack"), ("A pow", "idk"), ("Only ", "no")}
    phd = next(p for p in data.pairs if p.thread_id == "t2")
    assert phd.preferred.context == (
        "user: Is a PhD worth it?",
        "assistant: It depends on your field.",
    )
    assert phd.split == "test"
    assert phd.ratio == 12.0  # the denominator counts as at least 1
    assert phd.preferred.metadata == {}
    t1 = next(p for p in data.pairs if p.thread_id == "t1")
    assert t1.preferred.metadata == {"subreddit": "College", "created": "200"}
    assert t1.split in ("train", "dev", "test")


def test_pair_rows_keep_their_order_and_optional_scores() -> None:
    data = load_jsonl(FIXTURES / "pairs.jsonl")
    assert [p.preferred.text[:4] for p in data.pairs] == ["Take", "Prac", "Brin"]
    assert [p.split for p in data.pairs][1:] == ["test", "dev"]
    assert data.pairs[0].ratio == 15.0
    assert data.pairs[2].ratio is None
    # Only replies with a score take part in the rank correlation.
    assert len(data.replies) == 4
    assert data.pairs[1].thread_id.startswith("ctx-")


def test_prefers_is_the_ratio_and_margin_rule() -> None:
    assert prefers(4, 2) and prefers(2, -5) and prefers(2, 0)
    assert not prefers(3, 2)  # ratio under 2
    assert not prefers(1, -1)  # needs at least twice 1
    assert not prefers(2, 1.5)  # ratio 2 but margin under 2


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("not json", "line 2: not JSON"),
        ("[1, 2]", "line 2: not a JSON object"),
        (
            '{"context": "c", "reply": "r", "thread_id": "t"}',
            "line 2: field 'score': Field required",
        ),
        (
            '{"context": "c", "reply": "r", "score": "many", "thread_id": "t"}',
            "line 2: field 'score': Input should be a valid number",
        ),
        ('{"context": "c", "reply": "", "score": 1, "thread_id": "t"}', "line 2: field 'reply'"),
        (
            '{"context": "c", "reply": "r", "score": 1, "thread_id": "t", "votes": 3}',
            "line 2: field 'votes': Extra inputs are not permitted",
        ),
        (
            '{"context": [{"role": "user"}], "reply": "r", "score": 1, "thread_id": "t"}',
            "line 2: field 'context.0.content': Field required",
        ),
        (
            '{"context": "c", "reply": "r", "score": 1, "thread_id": "t", "split": "val"}',
            "line 2: field 'split'",
        ),
        (
            '{"context": "c", "chosen": "a", "rejected": "b"}',
            "line 2: a pair row in a file of scored",
        ),
    ],
)
def test_a_bad_line_is_named_with_its_field(tmp_path: Path, line: str, expected: str) -> None:
    good = '{"context": "c", "reply": "r", "score": 1, "thread_id": "t"}'
    path = tmp_path / "bad.jsonl"
    path.write_text(f"{good}\n{line}\n")
    with pytest.raises(KarmaDataError) as caught:
        load_jsonl(path)
    assert f"{path}, {expected}" in caught.value.message
    assert caught.value.status_code == 422


def test_a_file_without_pairs_or_rows_says_why(tmp_path: Path) -> None:
    flat = tmp_path / "flat.jsonl"
    rows = [{"context": "c", "reply": f"r{i}", "score": 5, "thread_id": "t"} for i in range(3)]
    flat.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(KarmaDataError, match="no preference pairs"):
        load_jsonl(flat)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    with pytest.raises(KarmaDataError, match="no rows"):
        load_jsonl(empty)
    with pytest.raises(KarmaDataError, match="no such file"):
        load_data(tmp_path / "missing.jsonl", tmp_path)


def test_the_shared_format_from_a_small_folder(tmp_path: Path) -> None:
    def write(name: str, rows: list[dict[str, object]]) -> None:
        with gzip.open(tmp_path / name, "wt") as handle:
            handle.writelines(json.dumps(r) + "\n" for r in rows)

    write("threads.jsonl.gz", [_thread("a", "College")])
    write(
        "comments.jsonl.gz",
        [
            _comment("c1", "a", None, 0, 9, 1000),
            _comment("c2", "a", None, 0, 1, 1000 + 3 * 3600),
            _comment("c3", "a", "c1", 1, 4, 1000 + 3 * 86400),
        ],
    )
    write(
        "pairs.jsonl.gz",
        [
            {
                "split": "dev",
                "thread_id": "a",
                "parent_id": None,
                "preferred": "c2",
                "other": "c1",
                "score_preferred": 1,
                "score_other": 9,
            }
        ],
    )
    data = load_data(tmp_path, tmp_path)
    assert len(data.replies) == 3 and len(data.pairs) == 1
    reply = {r.id: r for r in data.replies}
    assert reply["c2"].metadata == {"subreddit": "College", "depth": "0", "age": "3h"}
    assert reply["c3"].metadata["age"] == "3d"
    assert reply["c3"].context == ("title a", "post a", "text c1")
    assert reply["c3"].parent_key == "c1" and reply["c1"].parent_key == "a"
    (tmp_path / "pairs.jsonl.gz").unlink()
    with pytest.raises(KarmaDataError, match=r"missing pairs\.jsonl\.gz"):
        load_reddit_karma(tmp_path)


def _thread(thread_id: str, subreddit: str) -> dict[str, object]:
    return {
        "thread_id": thread_id,
        "split": "dev",
        "subreddit": subreddit,
        "title": f"title {thread_id}",
        "text": f"post {thread_id}",
        "score": 10,
    }


def _comment(
    cid: str, thread: str, parent: str | None, depth: int, score: int, created: int
) -> dict[str, object]:
    return {
        "id": cid,
        "split": "dev",
        "thread_id": thread,
        "parent_id": parent,
        "depth": depth,
        "text": f"text {cid}",
        "score": score,
        "created": created,
    }
