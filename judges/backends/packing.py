"""Packed tails: rows that share a long prefix and differ only in short tails run as one sequence.

Rubric scoring asks one yes/no question per (completion, criterion): the rows of one
completion are the same prompt up to the criterion, the last ~15 tokens (issue 11). Run as
separate rows, each needs its own copy of the completion's KV cache and a pass of its own;
that copying, not the arithmetic, made 8 x 10 criteria cost 4.3x 8 x 1 (BENCHMARKS.md).

Packed, a *family* of rows becomes one sequence: the family's prefix once, then every row's
tail one after another. A 4D attention mask lets each tail see the prefix and its own earlier
tokens but no other tail, and each tail's position ids restart where the prefix ends, so every
tail computes exactly what its row would alone (up to float rounding). The logits at the last
token of each tail give that row's first-token distribution. Families are padded on the right
into one batch; padding is invisible to every real token.

This module only builds tensors; :class:`~judges.backends.hf_runtime.HFRuntime` runs them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from judges.backends.batching import Row, common_prefix

#: Longest tail a family may pack (a rubric criterion is about 15 tokens).
MAX_TAIL = 64
#: Longest packed sequence past the cached head.
MAX_WIDTH = 1024


@dataclass(frozen=True, slots=True)
class Family:
    """Rows sharing ``prefix`` (each row has at least one token after it)."""

    prefix: list[int]
    rows: list[Row]

    def tails(self) -> list[list[int]]:
        return [row.ids[len(self.prefix) :] for row in self.rows]


def families(
    rows: Sequence[Row],
    head: int,
    min_shared: int,
    *,
    max_tail: int = MAX_TAIL,
    max_width: int = MAX_WIDTH,
) -> tuple[list[Family], list[Row]]:
    """Group rows whose prompts share at least ``min_shared`` tokens past the first ``head``.

    Rows are sorted by their ids, so rows with a common prefix are neighbours, and joined
    greedily while the family keeps ``min_shared`` tokens of its own. A family packs only
    when every tail has at most ``max_tail`` tokens (long tails gain nothing from packing and
    would make long sequences), and is cut so that no packed sequence passes ``max_width``
    tokens. Returns the families of two or more rows, and the rows left alone (for the
    ordinary path).
    """
    groups: list[tuple[list[int], list[Row]]] = []
    for row in sorted(rows, key=lambda r: r.ids):
        if groups:
            prefix, members = groups[-1]
            # every member keeps at least one token of its own after the prefix
            shared = min(common_prefix(prefix, row.ids), len(row.ids) - 1, len(prefix))
            if shared - head >= min_shared:
                groups[-1] = (prefix[:shared], [*members, row])
                continue
        groups.append((row.ids[: len(row.ids) - 1], [row]))
    packed: list[Family] = []
    alone: list[Row] = []
    for prefix, members in groups:
        family = Family(prefix, members)
        if len(members) < 2 or max(len(t) for t in family.tails()) > max_tail:
            alone.extend(members)
            continue
        for part in _cut(family, head, max_width):
            if len(part.rows) > 1:
                packed.append(part)
            else:
                alone.extend(part.rows)
    return packed, alone


def _cut(family: Family, head: int, max_width: int) -> list[Family]:
    """``family`` in parts whose packed sequences fit ``max_width`` tokens."""
    parts: list[Family] = []
    width = len(family.prefix) - head
    rows: list[Row] = []
    for row, tail in zip(family.rows, family.tails(), strict=True):
        if rows and width + len(tail) > max_width:
            parts.append(Family(family.prefix, rows))
            rows, width = [], len(family.prefix) - head
        rows.append(row)
        width += len(tail)
    parts.append(Family(family.prefix, rows))
    return parts


@dataclass(frozen=True)
class PackedBatch:
    """Tensors for one forward pass over packed families after a cached head.

    ``input_ids`` / ``position_ids``: ``[families, width]``; ``attention_mask``: additive,
    ``[families, 1, width, head + width]`` (0 where a query may attend, the dtype's minimum
    elsewhere); ``ends``: for each family, the index in its sequence of each tail's last
    token, in the order of the family's rows.
    """

    input_ids: torch.Tensor
    position_ids: torch.Tensor
    attention_mask: torch.Tensor
    ends: list[list[int]]


def pack(
    batch: Sequence[Family], head: int, pad_id: int, dtype: torch.dtype, device: torch.device
) -> PackedBatch:
    """The packed sequences of ``batch``, whose first ``head`` tokens are in a KV cache."""
    sequences: list[list[int]] = []
    positions: list[list[int]] = []
    segments: list[list[int]] = []  # 0: the family's prefix; i + 1: row i's tail
    ends: list[list[int]] = []
    for family in batch:
        shared = family.prefix[head:]
        ids, pos, seg, last = (
            list(shared),
            list(range(head, len(family.prefix))),
            [0] * len(shared),
            [],
        )
        for i, tail in enumerate(family.tails()):
            ids += tail
            pos += range(len(family.prefix), len(family.prefix) + len(tail))
            seg += [i + 1] * len(tail)
            last.append(len(ids) - 1)
        sequences.append(ids)
        positions.append(pos)
        segments.append(seg)
        ends.append(last)
    width = max(len(s) for s in sequences)
    input_ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
    position_ids = torch.zeros((len(batch), width), dtype=torch.long)
    segment = torch.full((len(batch), width), -1, dtype=torch.long)  # -1: padding
    for b, (ids, pos, seg) in enumerate(zip(sequences, positions, segments, strict=True)):
        input_ids[b, : len(ids)] = torch.tensor(ids)
        position_ids[b, : len(pos)] = torch.tensor(pos)
        segment[b, : len(seg)] = torch.tensor(seg)
    allowed = _allowed(segment, head)
    mask = torch.zeros(allowed.shape, dtype=dtype)
    mask.masked_fill_(~allowed, torch.finfo(dtype).min)
    return PackedBatch(
        input_ids.to(device), position_ids.to(device), mask[:, None].to(device), ends
    )


def _allowed(segment: torch.Tensor, head: int) -> torch.Tensor:
    """``[families, width, head + width]``: which keys each query may attend to.

    A real token sees the whole cached head, then causally the family's prefix and its own
    segment. A padding query sees only itself (a row with nothing to attend to would give
    NaNs); no real query sees padding.
    """
    families_n, width = segment.shape
    query = segment[:, :, None]
    key = segment[:, None, :]
    causal = torch.ones((width, width), dtype=torch.bool).tril()[None]
    packed = causal & (key != -1) & ((key == 0) | (key == query)) & (query != -1)
    padding = (query == -1) & torch.eye(width, dtype=torch.bool)[None]
    cached = (segment != -1)[:, :, None].expand(families_n, width, head)
    return torch.cat([cached, packed | padding], dim=2)
