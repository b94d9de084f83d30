"""Calibrating the simulator to real users, and measuring its realism (blocking; jobs and the
CLI run it in a thread).

A calibration (Calibrated Interactive RL, ``shared/design/METHODS.md``) is two fitted parts:

* a LoRA adapter on the simulator's chat model, trained with TRL's ``SFTTrainer`` (peft) on
  real user turns given their dialogue so far (prompt-completion data: the loss is on the
  user's turn only; a dialogue's last user turn ends with the end marker);
* a satisfaction predictor (:mod:`services.simulator.predictor`) fitted on the rated turns;
* an act model (:mod:`services.simulator.acts`): when the user ends and whether the turn asks
  a question, learned from real contexts; the LoRA learns each real turn with its acts written
  in its instructions, so the simulator can be told them (issue 24).

Then both simulators, the prompted base model and the calibrated one, write the user's turn at
held-out real contexts and :mod:`services.simulator.realism` compares them with the real ones;
with ``eval_dialogues`` they also play whole dialogues against the base model as assistant
(:mod:`services.simulator.dialogues`).

The CPU default (``max_steps=40`` of 4 examples at most 256 tokens, 3,000 rated turns, 3,000
contexts for the act model, 40 held-out contexts and 8 whole dialogues of at most 12 user
turns per domain) is meant to finish within 30 minutes on two cores; BENCHMARKS.md says what
was measured (issue 24: on a shared machine, only a reduced run). Larger runs change only the
numbers (GPU: ``device``).
"""

from __future__ import annotations

import random
import resource
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from judges.model_worker import loading_lock
from plaudit_wire.simulator import CalibrationConfig
from services.core.jobs.run_folders import last_checkpoint, trainer_output
from services.simulator import data as uss
from services.simulator.acts import ActModel, Context, context_texts, fit_acts, real_acts
from services.simulator.acts import features as act_features
from services.simulator.dialogues import WholeDialogue, cut, dialogue_report
from services.simulator.predictor import SatisfactionPredictor, features, fit, pair_texts
from services.simulator.prompting import MAX_HISTORY, simulator_messages, target_text
from services.simulator.realism import Embed, report
from services.simulator.rollout import Sampling, UserModel, said, simulate, simulate_dialogues

Progress = Callable[[int, int, str], None]
METRICS_FILE = "calibration.json"


#: LoRA steps between two checkpoints of a calibration job (each a few MB).
CHECKPOINT_STEPS = 10


@dataclass
class CalibrationResult:
    path: Path
    metrics: dict[str, Any]


def sft_rows(
    items: Sequence[uss.UserTurnExample], tokenizer: Any, max_length: int
) -> list[dict[str, Any]]:
    """Conversational prompt-completion rows: TRL masks the prompt, so only the user's turn
    is learned; the instructions name the real turn's acts (:func:`acts.real_acts`). The
    oldest turns are dropped until prompt and turn fit ``max_length`` tokens (TRL cuts the
    end, which would drop the very turn to learn); a turn too long even alone is left out."""
    rows = []
    for item in items:
        completion = [{"role": "assistant", "content": target_text(item.text, item.is_last)}]
        history = said(item.history)
        acts = real_acts(item.text, item.is_last)
        for keep in range(min(len(history), MAX_HISTORY), -1, -1):
            prompt = simulator_messages(item.goal, history[len(history) - keep :], acts)
            ids = tokenizer.apply_chat_template([*prompt, *completion], tokenize=True)
            if len(_ids(ids)) <= max_length:
                rows.append({"prompt": [dict(m) for m in prompt], "completion": completion})
                break
    return rows


def _ids(encoded: Any) -> list[int]:
    """Token ids from apply_chat_template (a list, or a BatchEncoding in transformers 5)."""
    if isinstance(encoded, list):
        return encoded
    return list(encoded["input_ids"])


def calibrate(
    config: CalibrationConfig,
    *,
    base_dir: Path,
    data_dir: Path,
    roots: Sequence[Path],
    out: Path,
    embed: Embed,
    progress: Progress | None = None,
    checkpoints: Path | None = None,
) -> CalibrationResult:
    """Fit a calibration into ``out`` (``adapter/``, ``predictor.json``) and measure it.

    With ``checkpoints``, the LoRA trainer keeps a resumable checkpoint there every
    :data:`CHECKPOINT_STEPS` steps, and a run given a folder holding one resumes from it
    (a retried ``simulator.calibrate`` job, issue 23)."""
    import torch

    report_progress = progress or (lambda done, total, stage: None)
    if config.threads is not None:
        torch.set_num_threads(config.threads)
    started = time.monotonic()
    report_progress(0, 1, "loading")
    dialogues = uss.load(config.data, data_dir, roots)
    train = uss.examples(uss.in_split(dialogues, "train"))
    if not train:
        raise uss.DialogueDataError("no dialogues in the train split", param="data")
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(config.seed)

    lora_started = time.monotonic()
    turns = config.max_train_turns or max(1, config.max_steps * config.batch_size)
    lora_items = rng.sample(train, min(turns, len(train)))
    training = _train_lora(config, base_dir, lora_items, out, report_progress, checkpoints)
    training["seconds"] = round(time.monotonic() - lora_started, 1)

    report_progress(0, 1, "satisfaction")
    rated = [item for item in train if item.satisfaction is not None]
    rated = rng.sample(rated, min(config.satisfaction_turns, len(rated)))
    predictor = fit_predictor(rated, embed, seed=config.seed)
    predictor.save(out)
    levels = [item.satisfaction for item in rated if item.satisfaction is not None]
    majority = max(set(levels), key=levels.count)
    report_progress(0, 1, "acts")
    act_model = fit_act_model(rng.sample(train, min(config.act_turns, len(train))), embed, config)
    act_model.save(out)

    realism = measure(
        config,
        dialogues,
        base_dir=base_dir,
        adapter_dir=out / "adapter" if (out / "adapter").is_dir() else None,
        predictor=predictor,
        acts=act_model,
        embed=embed,
        majority=majority,
        progress=report_progress,
    )
    metrics = {
        "base_model": base_dir.name,
        "data": {
            "sources": config.data,
            "dialogues": len(dialogues),
            "train_user_turns": len(train),
            "lora_turns": len(lora_items),
            "satisfaction_turns": len(rated),
            "act_turns": min(config.act_turns, len(train)),
            "majority_level": majority,
        },
        "training": {
            **training,
            "total_seconds": round(time.monotonic() - started, 1),
            "cpu_seconds": _cpu_seconds(),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        },
        "realism": realism,
        "params": config.model_dump(),
    }
    return CalibrationResult(out, metrics)


def _cpu_seconds() -> float:
    """User + system CPU time of this process so far (every torch thread counted)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return round(usage.ru_utime + usage.ru_stime, 1)


def _train_lora(
    config: CalibrationConfig,
    base_dir: Path,
    items: Sequence[uss.UserTurnExample],
    out: Path,
    progress: Progress,
    checkpoints: Path | None = None,
    checkpoint_steps: int | None = None,
) -> dict[str, Any]:
    """LoRA through TRL's SFTTrainer; the adapter goes to ``out/adapter``; checkpoints (the
    adapter, optimizer, scheduler and data position: a few MB) every ``checkpoint_steps``
    into ``checkpoints``, resumed from when one is there."""
    if config.max_steps == 0:
        return {"steps": 0, "loss": None, "lora": None}
    # Not at the same time as a model worker's load: transformers' lazy imports are not
    # thread-safe (judges.model_worker.loading_lock).
    with loading_lock():
        from datasets import Dataset
        from peft import LoraConfig
        from transformers import AutoTokenizer, TrainerCallback
        from trl.trainer.sft_config import SFTConfig
        from trl.trainer.sft_trainer import SFTTrainer

        from services.simulator.model import ADAPTER_DIR, load_merged

        tokenizer = AutoTokenizer.from_pretrained(str(base_dir), local_files_only=True)
        model = load_merged(base_dir, None).train()
    lora = LoraConfig(
        r=config.lora_rank,
        lora_alpha=config.lora_alpha,
        lora_dropout=0.05,
        target_modules=["q_proj", "k_proj", "v_proj", "o_proj"],
        task_type="CAUSAL_LM",
    )

    class Steps(TrainerCallback):
        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            progress(state.global_step, config.max_steps, "train")

    rows = sft_rows(items, tokenizer, config.max_length)
    if not rows:
        raise uss.DialogueDataError(
            f"no user turn fits max_length={config.max_length} tokens", param="max_length"
        )
    with trainer_output(checkpoints, "plaudit-sim-") as work:
        resume = last_checkpoint(checkpoints)
        args = SFTConfig(
            output_dir=work,
            max_steps=config.max_steps,
            per_device_train_batch_size=config.batch_size,
            learning_rate=config.learning_rate,
            lr_scheduler_type="linear",
            warmup_steps=max(1, config.max_steps // 10),
            max_length=config.max_length,
            bf16=False,
            use_cpu=config.device == "cpu",
            save_strategy="steps" if checkpoints else "no",
            save_steps=checkpoint_steps or CHECKPOINT_STEPS,
            save_total_limit=1,
            report_to="none",
            logging_steps=max(1, config.max_steps // 10),
            disable_tqdm=True,
            seed=config.seed,
            dataloader_num_workers=0,
        )
        trainer = SFTTrainer(
            model=model,
            args=args,
            train_dataset=Dataset.from_list(rows),
            processing_class=tokenizer,
            peft_config=lora,
            callbacks=[Steps()],
        )
        result = trainer.train(resume_from_checkpoint=str(resume) if resume else None)
        trained: Any = trainer.model
        trained.save_pretrained(str(out / ADAPTER_DIR))
        losses = [e["loss"] for e in trainer.state.log_history if "loss" in e]
    return {
        "steps": int(result.global_step),
        "resumed_from_step": int(resume.name.rsplit("-", 1)[1]) if resume else 0,
        "examples": len(rows),
        "loss": {"first": losses[0] if losses else None, "last": losses[-1] if losses else None},
        "lora": {"rank": config.lora_rank, "alpha": config.lora_alpha},
    }


def fit_predictor(
    rated: Sequence[uss.UserTurnExample], embed: Embed, *, seed: int = 0
) -> SatisfactionPredictor:
    assistant, reply = pair_texts(rated)
    replies = [r or "(empty)" for r in reply]
    x = features(embed(assistant), embed(replies), (assistant, replies), "cues")
    return fit(x, [item.satisfaction or 3 for item in rated], seed=seed, feature_set="cues")


def fit_act_model(
    items: Sequence[uss.UserTurnExample], embed: Embed, config: CalibrationConfig
) -> ActModel:
    contexts = [Context.of(item) for item in items]
    x = act_features(contexts, embed(context_texts(contexts)))
    return fit_acts(x, [real_acts(i.text, i.is_last) for i in items], seed=config.seed)


def measure(
    config: CalibrationConfig,
    dialogues: Sequence[uss.Dialogue],
    *,
    base_dir: Path,
    adapter_dir: Path | None,
    predictor: SatisfactionPredictor | None,
    embed: Embed,
    majority: int,
    acts: ActModel | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Realism on the held-out split: ``before`` (prompted base model) when asked, and
    ``after`` (adapter, predictor and act model) when there is a calibration; per turn at real
    contexts, and over whole dialogues (``dialogues_before`` / ``dialogues_after``)."""
    from services.simulator.model import load_runtime

    report_progress = progress or (lambda done, total, stage: None)
    held_out = uss.in_split(dialogues, config.eval_split)
    if not held_out:
        raise uss.DialogueDataError(f"no dialogues in the {config.eval_split} split")
    items = uss.sample_per_domain(uss.examples(held_out), config.eval_per_domain, config.seed)
    counts: dict[str, list[int]] = {}
    for dialogue in held_out:
        counts.setdefault(dialogue.domain, []).append(dialogue.user_turns)
    out: dict[str, Any] = {
        "split": config.eval_split,
        "contexts": len(items),
        "temperature": config.temperature,
    }
    sampling = Sampling(config.max_new_tokens, config.temperature, config.act_retries, config.seed)
    real = real_dialogues(held_out, config)
    base = load_runtime(base_dir, None, max_batch_size=8)
    runs: list[tuple[str, UserModel]] = []
    if config.measure_before:
        runs.append(("before", UserModel(base)))
    if adapter_dir is not None or predictor is not None:
        runtime = (
            base if adapter_dir is None else load_runtime(base_dir, adapter_dir, max_batch_size=8)
        )
        runs.append(("after", UserModel(runtime, predictor, acts)))
    for name, user in runs:
        report_progress(0, len(items), f"measuring {name}")
        simulated = simulate(user, items, embed, sampling, report_progress, name)
        out[name] = report(items, simulated, embed, counts, majority, config.seed)
        if real:
            played = simulate_dialogues(
                user,
                base,
                [d.domain for d in real],
                embed,
                sampling,
                config.dialogue_max_turns,
                report_progress,
                name,
            )
            out[f"dialogues_{name}"] = dialogue_report(
                real, played, embed, config.dialogue_max_turns, config.seed
            )
    return out


def real_dialogues(
    held_out: Sequence[uss.Dialogue], config: CalibrationConfig
) -> list[WholeDialogue]:
    """``eval_dialogues`` held-out dialogues per domain, cut at ``dialogue_max_turns``."""
    if config.eval_dialogues == 0:
        return []
    rng = random.Random(config.seed)
    by_domain: dict[str, list[uss.Dialogue]] = {}
    for dialogue in held_out:
        by_domain.setdefault(dialogue.domain, []).append(dialogue)
    out = []
    for domain in sorted(by_domain):
        group = by_domain[domain]
        for dialogue in rng.sample(group, min(config.eval_dialogues, len(group))):
            texts = [t.text for t in dialogue.turns if t.role == "user"]
            out.append(cut(domain, texts, config.dialogue_max_turns))
    return out


def copy_calibration(source: Path, target: Path) -> None:
    shutil.copytree(source, target, dirs_exist_ok=True)
