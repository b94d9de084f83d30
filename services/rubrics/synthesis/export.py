"""Kept instances as datasets the trainers read (pure, but for pyarrow for parquet).

- ``trl``: JSONL, ``{"prompt", "rubric_id"}`` per line. TRL hands dataset columns to reward
  functions, and ``plaudit_reward_func`` sends ``rubric_id`` with each group, so the
  ``rubric`` channel scores each prompt with its own rubric (``plaudit train --prompts``
  reads the same file).
- ``verl``: parquet with verl's columns: ``prompt`` (chat messages), ``data_source``,
  ``ability`` (the domain), ``reward_model`` (``{"style": "rule", "ground_truth": rubric}``)
  and ``extra_info`` (``question``, which ``PLAUDIT_PROMPT_KEY`` reads by default, and
  ``rubric_id``).
- ``openrlhf``: JSONL ``{"prompt", "label"}``: run OpenRLHF with ``--label_key label`` and the
  reward server with ``PLAUDIT_LABEL_COLUMN=rubric_id`` (trainer_client/openrlhf.py), which sends
  each label as the ``rubric_id`` column.

Every rubric is pinned (``rb_...@N``), so a later edit of a rubric does not change what an
exported dataset trains on.
"""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from typing import Any

from plaudit_wire.synthesis import ExportFormat, InstanceOut
from services.core.errors import InvalidInput

MEDIA_TYPES: dict[ExportFormat, str] = {
    "trl": "application/x-ndjson",
    "verl": "application/vnd.apache.parquet",
    "openrlhf": "application/x-ndjson",
}
EXTENSIONS: dict[ExportFormat, str] = {"trl": "jsonl", "verl": "parquet", "openrlhf": "jsonl"}
LABEL = "label"


def rubric_ref(instance: InstanceOut) -> str:
    return f"{instance.rubric_id}@{instance.rubric_version}"


def rows(instances: Sequence[InstanceOut], fmt: ExportFormat) -> list[dict[str, Any]]:
    """One row per kept instance, in the format's columns."""
    out: list[dict[str, Any]] = []
    for item in instances:
        ref, question = rubric_ref(item), item.question or ""
        if fmt == "trl":
            out.append({"prompt": question, "rubric_id": ref})
        elif fmt == "openrlhf":
            out.append({"prompt": question, LABEL: ref})
        else:
            out.append(
                {
                    "data_source": f"plaudit/rubrics/{item.job_id}",
                    "prompt": [{"role": "user", "content": question}],
                    "ability": item.domain or "general",
                    "reward_model": {"style": "rule", "ground_truth": ref},
                    "extra_info": {
                        "question": question,
                        "rubric_id": ref,
                        "index": len(out),
                    },
                }
            )
    return out


def render(instances: Sequence[InstanceOut], fmt: ExportFormat) -> bytes:
    """The dataset file's bytes."""
    table = rows(instances, fmt)
    if fmt != "verl":
        return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in table).encode()
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:  # pragma: no cover - pyarrow comes with the serve extra
        raise InvalidInput(
            "verl export needs pyarrow on the server (pip install pyarrow)", param="format"
        ) from None
    buffer = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(table), buffer)
    return buffer.getvalue()
