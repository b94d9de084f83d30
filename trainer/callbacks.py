"""A progress bar and one short log line per optimizer step, read from the trainer's logs.

TRL logs ``reward`` and ``reward_std`` (over the batch, failed completions excluded),
``rewards/<func>/mean`` and whatever the reward function reported through ``log_metric``
(``plaudit/failed``, ``plaudit/scored``, and, when the reward function reports them, per
channel means and the judge's order inconsistency). The line reads::

    step 3/10  reward 3.412 ± 0.514  failed 0/4  judge inconsistency 0.25  loss -0.031  4.1s
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from tqdm.auto import tqdm
from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

log = logging.getLogger(__name__)

#: log keys whose name says they measure the judge's (in)consistency
_CONSISTENCY_MARKERS = ("consisten",)


def format_step_line(step: int, max_steps: int, logs: Mapping[str, Any]) -> str:
    """The one-line summary of a step's logs.

    >>> format_step_line(2, 5, {"reward": 1.5, "reward_std": 0.25, "plaudit/failed": 1.0,
    ...                         "plaudit/scored": 3.0, "loss": -0.5})
    'step 2/5  reward 1.500 ± 0.250  failed 1/4  loss -0.500'
    """
    parts = [f"step {step}/{max_steps}", f"reward {_num(logs.get('reward'))}"]
    parts[-1] += f" ± {_num(logs.get('reward_std'))}"
    failed, scored = logs.get("plaudit/failed"), logs.get("plaudit/scored")
    if failed is not None and scored is not None:
        parts.append(f"failed {round(failed)}/{round(failed + scored)}")
    for key in sorted(logs):
        if "/channels/" in key:
            parts.append(f"{key.rsplit('/channels/', 1)[-1]} {_num(logs[key])}")
    for key in sorted(logs):
        if any(marker in key for marker in _CONSISTENCY_MARKERS):
            parts.append(f"{key.rsplit('/', 1)[-1].replace('_', ' ')} {_num(logs[key])}")
    if "loss" in logs:
        parts.append(f"loss {_num(logs['loss'])}")
    if "step_time" in logs:
        parts.append(f"{float(logs['step_time']):.1f}s")
    return "  ".join(parts)


def _num(value: Any) -> str:
    return "n/a" if value is None else f"{float(value):.3f}"


class StepLogCallback(TrainerCallback):
    """A tqdm bar over the optimizer steps and :func:`format_step_line` after each step.

    Replaces transformers' ``ProgressCallback``/``PrinterCallback`` (which print the whole
    logs dict). ``emit`` receives each line (default: written above the bar); ``show_bar``
    False leaves the bar out (e.g. when stderr is not a terminal).
    """

    def __init__(self, emit: Callable[[str], None] | None = None, *, show_bar: bool = True) -> None:
        self._emit = emit
        self._show_bar = show_bar
        self._bar: Any = None
        self.lines: list[str] = []

    def on_train_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **_: Any
    ) -> None:
        if state.is_world_process_zero and self._show_bar:
            self._bar = tqdm(total=state.max_steps, desc="GRPO steps", unit="step")

    def on_step_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **_: Any
    ) -> None:
        if self._bar is not None:
            self._bar.update(state.global_step - self._bar.n)

    def on_log(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        logs: dict[str, Any] | None = None,
        **_: Any,
    ) -> None:
        if not state.is_world_process_zero or not logs or "reward" not in logs:
            return
        line = format_step_line(state.global_step, state.max_steps, logs)
        self.lines.append(line)
        if self._emit is not None:
            self._emit(line)
        elif self._bar is not None:
            self._bar.write(line)
        else:
            log.info("%s", line)

    def on_train_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **_: Any
    ) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
