"""Packed tails, the pure part: which rows form families, and the sequences, positions and
masks they pack into (the real model's equivalence is in test_prefix_sharing.py)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from judges.backends.batching import Row  # noqa: E402
from judges.backends.packing import Family, families, pack  # noqa: E402

HEAD = [1, 2, 3]


def _row(owner: int, *ids: int) -> Row:
    return Row(owner, [*HEAD, *ids])


def test_rows_sharing_enough_past_the_head_form_a_family() -> None:
    rows = [
        _row(0, 10, 11, 12, 20),
        _row(1, 10, 11, 12, 21, 22),
        _row(2, 40, 41, 42, 50),  # its own prefix: alone
        _row(3, 10, 11, 12, 23),
    ]
    found, alone = families(rows, head=len(HEAD), min_shared=3)
    assert [sorted(r.owner for r in f.rows) for f in found] == [[0, 1, 3]]
    assert found[0].prefix == [*HEAD, 10, 11, 12]
    assert [r.owner for r in alone] == [2]


def test_a_family_leaves_every_row_a_tail() -> None:
    # one row is the other's prefix: the family stops a token short of the shorter row
    rows = [_row(0, 10, 11, 12), _row(1, 10, 11, 12, 13, 14)]
    [family], alone = families(rows, head=len(HEAD), min_shared=2)
    assert not alone
    assert family.prefix == [*HEAD, 10, 11]
    assert family.tails() == [[12], [12, 13, 14]]


def test_too_little_in_common_packs_nothing() -> None:
    rows = [_row(0, 10, 20), _row(1, 10, 21)]
    found, alone = families(rows, head=len(HEAD), min_shared=2)
    assert found == [] and len(alone) == 2


def test_long_tails_do_not_pack_and_wide_families_are_cut() -> None:
    rows = [_row(0, 10, 11, 12, *range(100, 110)), _row(1, 10, 11, 12, 20)]
    found, alone = families(rows, head=len(HEAD), min_shared=3, max_tail=8)
    assert found == [] and len(alone) == 2
    rows = [_row(i, 10, 11, 12, 20 + i, 30) for i in range(5)]
    found, alone = families(rows, head=len(HEAD), min_shared=3, max_width=3 + 2 * 2)
    assert [len(f.rows) for f in found] == [2, 2] and [r.owner for r in alone] == [4]


def test_tails_restart_their_positions_and_never_see_each_other() -> None:
    family = Family([*HEAD, 10, 11], [_row(0, 10, 11, 20, 21), _row(1, 10, 11, 30)])
    lone = Family([*HEAD, 50], [_row(2, 50, 60), _row(3, 50, 70)])
    batch = pack([family, lone], head=len(HEAD), pad_id=0, dtype=torch.float32, device="cpu")
    assert batch.input_ids.tolist() == [[10, 11, 20, 21, 30], [50, 60, 70, 0, 0]]
    # positions continue after the cached head; each tail starts where the prefix ends
    assert batch.position_ids[0].tolist() == [3, 4, 5, 6, 5]
    assert batch.position_ids[1, :3].tolist() == [3, 4, 4]
    assert batch.ends == [[3, 4], [1, 2]]
    seen = batch.attention_mask[:, 0] == 0  # [family, query, head + key]
    assert seen.shape == (2, 5, 3 + 5)
    assert seen[:, :, :3][batch.input_ids != 0].all(), "every real token sees the head"
    first = seen[0, :, 3:]
    assert first[4].tolist() == [True, True, False, False, True], "tail 2 skips tail 1"
    assert first[3].tolist() == [True, True, True, True, False], "tail 1 is causal"
    second = seen[1, :, 3:]
    assert not second[:3, 3:].any(), "no real token sees padding"
    assert second[3].tolist() == [False, False, False, True, False], "padding sees itself"
