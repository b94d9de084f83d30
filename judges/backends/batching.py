"""Batch plumbing shared by the transformers runtime: rows, left padding, chunking.

Rows are sorted by length and cut into chunks so that one forward pass pads little; a
chunk that fails marks only its own items, and a chunk that starts after the deadline is
not run at all.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import torch

from judges.backends.base import ChoiceResult, GenerateResult, ItemStatus

logger = logging.getLogger(__name__)

R = TypeVar("R", ChoiceResult, GenerateResult)


@dataclass(frozen=True, slots=True)
class Row:
    """One tokenized prompt of a batch.

    ``owner`` is the index of the request it serves; ``weight`` how many extra rows it
    adds to a forward pass (a choice prompt's multi-token candidates), see
    :func:`run_in_chunks`.
    """

    owner: int
    ids: list[int]
    weight: int = 0


def pad_left(
    rows: list[Row], pad_id: int, device: torch.device, skip: int = 0
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Left-padded ``input_ids``, ``attention_mask`` and ``position_ids`` for ``rows``.

    Position ids count real tokens only (``cumsum(mask) - 1``), so a padded row sees the
    same positions as it would alone. With ``skip``, the rows' first ``skip`` tokens (the
    same in every row) are already in a KV cache: only the rest is padded
    (``[prefix][pads][suffix]``), the mask covers the prefix too, and the positions of
    the suffix continue after the prefix.
    """
    width = max(len(row.ids) for row in rows) - skip
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), skip + width), dtype=torch.long)
    mask[:, :skip] = 1
    for i, row in enumerate(rows):
        tail = row.ids[skip:]
        ids[i, width - len(tail) :] = torch.tensor(tail)
        mask[i, skip + width - len(tail) :] = 1
    positions = (mask.cumsum(dim=1) - 1).clamp(min=0)[:, skip:]
    return ids.to(device), mask.to(device), positions.to(device)


def shared_prefix_length(rows: list[Row]) -> int:
    """How many leading tokens all ``rows`` have in common, leaving each at least one."""
    first = rows[0].ids
    limit = max(min(len(row.ids) for row in rows) - 1, 0)
    for k in range(limit):
        if any(row.ids[k] != first[k] for row in rows):
            return k
    return limit


def common_prefix(a: list[int], b: list[int]) -> int:
    """How many leading tokens ``a`` and ``b`` have in common."""
    for k, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return k
    return min(len(a), len(b))


def prefix_groups(sources: list[list[Row]]) -> list[list[Row]]:
    """Join the rows of several requests into groups that share a long prompt prefix.

    Each request's rows share a prefix of their own (template, question). The requests
    are sorted by that prefix, so requests with a common head are neighbours, and joined
    greedily while that saves prefix tokens: ``n`` rows sharing ``p`` tokens compute them
    once instead of ``n`` times (``(n - 1) * p`` saved), so a request joins the group
    before it when ``(n + k - 1) * joined >= (n - 1) * p_group + (k - 1) * p_request``.
    Requests on the same question end up together; requests on different questions
    apart, unless they are single rows (nothing of their own to share) or the questions
    are short next to the common head.
    """
    entries = sorted(
        ((rows[0].ids[: shared_prefix_length(rows)], rows) for rows in sources if rows),
        key=lambda entry: entry[0],
    )
    groups: list[tuple[list[int], list[Row]]] = []
    for prefix, rows in entries:
        if groups:
            head, members = groups[-1]
            joined = common_prefix(head, prefix)
            apart = (len(members) - 1) * len(head) + (len(rows) - 1) * len(prefix)
            if (len(members) + len(rows) - 1) * joined >= apart:
                groups[-1] = (head[:joined], members + rows)
                continue
        groups.append((prefix, list(rows)))
    return [rows for _, rows in groups]


def run_in_chunks(
    rows: list[Row],
    max_batch_size: int,
    run: Callable[[list[Row]], None],
    results: list[R | None],
    failed: Callable[[ItemStatus, str], R],
    deadline: float | None,
) -> None:
    """Call ``run`` on length-sorted chunks under ``torch.inference_mode``.

    A chunk holds at most ``max_batch_size`` rows and at most ``max_batch_size`` rows of
    weight, unless one row outweighs that alone. A chunk that raises is run again row by
    row, so only the rows that fail on their own get ``error`` results (a chunk may mix
    the rows of several merged requests); chunks reached after ``deadline`` (a
    ``time.monotonic()`` value) get ``timeout`` results.
    """
    for chunk in _chunks(sorted(rows, key=lambda row: len(row.ids)), max_batch_size):
        if not _run_chunk(chunk, run, results, failed, deadline) and len(chunk) > 1:
            logger.warning("a batch of %d rows failed; running its rows one by one", len(chunk))
            for row in chunk:
                _run_chunk([row], run, results, failed, deadline)


def _run_chunk(
    chunk: list[Row],
    run: Callable[[list[Row]], None],
    results: list[R | None],
    failed: Callable[[ItemStatus, str], R],
    deadline: float | None,
) -> bool:
    """Run one chunk; False when it raised (its owners then hold ``error`` results)."""
    if deadline is not None and time.monotonic() > deadline:
        for row in chunk:
            results[row.owner] = failed("timeout", "deadline exceeded before the batch ran")
        return True
    try:
        with torch.inference_mode():
            run(chunk)
    except Exception as exc:
        logger.exception("batch of %d rows failed", len(chunk))
        for row in chunk:
            results[row.owner] = failed("error", f"{type(exc).__name__}: {exc}")
        return False
    return True


def _chunks(rows: list[Row], limit: int) -> list[list[Row]]:
    chunks: list[list[Row]] = []
    for row in rows:
        last = chunks[-1] if chunks else None
        if (
            last is not None
            and len(last) < limit
            and sum(r.weight for r in last) + row.weight <= limit
        ):
            last.append(row)
        else:
            chunks.append([row])
    return chunks


def pad_token_id(tokenizer: Any) -> int:
    """The tokenizer's pad id, else its EOS id, else 0 (padding is masked anyway)."""
    for candidate in (tokenizer.pad_token_id, tokenizer.eos_token_id):
        if candidate is not None:
            return int(candidate)
    return 0


def stop_token_ids(model: Any, tokenizer: Any) -> list[int]:
    """End-of-turn ids: the tokenizer's EOS first, then the generation config's."""
    ids: list[int] = []
    if tokenizer.eos_token_id is not None:
        ids.append(int(tokenizer.eos_token_id))
    configured = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    for value in configured if isinstance(configured, list) else [configured]:
        if value is not None and int(value) not in ids:
            ids.append(int(value))
    if not ids:
        raise ValueError("the tokenizer defines no end-of-sequence token")
    return ids
