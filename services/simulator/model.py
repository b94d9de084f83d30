"""The simulator's language model: the base chat model (SmolLM2-135M-Instruct by default), or
the base with a calibration's LoRA adapter merged into its weights.

:class:`CalibratedBackend` is the judge's :class:`~judges.backends.local.LocalBackend` (the
same model worker: one thread, concurrent calls merged into shared batches) whose model is
the base plus the adapter, merged once at load (peft's ``merge_and_unload``), so serving a
calibration costs what serving the base costs.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from judges.backends.base import ChatMessage, ChoiceRequest, GenerateRequest
from judges.backends.hf_runtime import DTYPES, HFRuntime
from judges.backends.local import LocalBackend
from services.simulator.prompting import LEVELS, ReadTurn, read_turn

ADAPTER_DIR = "adapter"


def load_merged(base_dir: Path, adapter_dir: Path | None, dtype: str = "float32") -> Any:
    """The base model (local files only), with ``adapter_dir``'s LoRA merged in when given."""
    from transformers import AutoModelForCausalLM

    model: Any = AutoModelForCausalLM.from_pretrained(
        str(base_dir), dtype=DTYPES[dtype], local_files_only=True
    )
    if adapter_dir is not None:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, str(adapter_dir)).merge_and_unload()
    return model.eval()


def load_runtime(
    base_dir: Path, adapter_dir: Path | None, *, max_batch_size: int = 8, **kwargs: Any
) -> HFRuntime:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(base_dir), local_files_only=True)
    model = load_merged(base_dir, adapter_dir)
    return HFRuntime(model, tokenizer, max_batch_size=max_batch_size, **kwargs)


class CalibratedBackend(LocalBackend):
    """A LocalBackend on ``base`` (None: the default SmolLM2) with ``adapter_dir`` merged."""

    def __init__(
        self,
        adapter_dir: Path,
        base: str | os.PathLike[str] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(base, **kwargs)
        self._adapter_dir = adapter_dir

    def _load(self) -> HFRuntime:
        import torch

        from judges.backends.convert import resolve_model_dir

        if self._num_threads is not None:
            torch.set_num_threads(self._num_threads)
        base_dir = resolve_model_dir(self._model_ref, self._cache_dir)
        runtime = load_runtime(
            base_dir,
            self._adapter_dir,
            max_batch_size=self._max_batch_size,
            max_input_tokens=self._max_input_tokens,
            prefix_min_tokens=self._prefix_min_tokens,
        )
        self._model_dir = base_dir
        return runtime


def generate_turns(
    runtime: HFRuntime,
    prompts: Sequence[list[ChatMessage]],
    *,
    max_new_tokens: int,
    temperature: float,
    seed: int,
) -> list[ReadTurn]:
    """Blocking: one simulated user turn per prompt (evaluation and calibration jobs)."""
    requests = [
        GenerateRequest(
            messages=p, max_new_tokens=max_new_tokens, temperature=temperature, seed=seed + k
        )
        for k, p in enumerate(prompts)
    ]
    results = runtime.generate(requests)
    return [read_turn(r.text) if r.ok else ReadTurn("", False, None) for r in results]


def prompted_levels(
    runtime: HFRuntime, prompts: Sequence[list[ChatMessage]]
) -> list[list[float] | None]:
    """Blocking: the prompted 1-5 satisfaction distribution for each prompt (None: failed)."""
    requests = [ChoiceRequest(messages=p, candidates=LEVELS) for p in prompts]
    return [list(r.probs) if r.ok else None for r in runtime.score_choices(requests)]
