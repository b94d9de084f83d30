"""Running the simulator offline (blocking; calibration and evaluation): its turn at held-out
real contexts, and whole dialogues against an assistant model.

A calibrated simulator with an act model (:mod:`services.simulator.acts`) first chooses the
acts of each turn, writes the turn with them in its instructions, and writes again (a new
seed, at most ``act_retries`` times) a turn whose question mark disagrees with the chosen act;
its end is the act model's decision, reported as the end marker.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from judges.backends.base import ChatMessage
from services.simulator import data as uss
from services.simulator.acts import ActModel, Acts, Context, context_texts
from services.simulator.acts import features as act_features
from services.simulator.dialogues import WholeDialogue
from services.simulator.predictor import SatisfactionPredictor
from services.simulator.prompting import ReadTurn, Said, simulator_messages
from services.simulator.realism import Embed, Simulated

Progress = Callable[[int, int, str], None]
CHUNK = 16

#: The assistant the simulated users talk to in whole dialogues, per shared domain.
ASSISTANT_ROLES = {
    "sgd": "You are a virtual assistant. You help with everyday tasks: weather, flights, "
    "restaurants, music, films and events. Answer briefly.",
    "mwoz": "You are the Cambridge tourist information desk. You help with restaurants, "
    "hotels, attractions, trains and taxis. Answer briefly.",
    "ccpe": "You are an interviewer. Ask the person which films they like and dislike, and "
    "why, one short question at a time.",
}
GENERIC_ROLE = "You are a helpful assistant. Answer briefly."


@dataclass
class Sampling:
    max_new_tokens: int
    temperature: float
    act_retries: int
    seed: int


@dataclass
class UserModel:
    """What writes the user's turns: a loaded model, and a calibration's fitted parts."""

    runtime: Any
    predictor: SatisfactionPredictor | None = None
    acts: ActModel | None = None


def said(history: Sequence[uss.Turn]) -> list[Said]:
    return [Said(t.role == "user", t.text) for t in history]


def choose_acts(
    model: ActModel, contexts: Sequence[Context], embed: Embed, rng: random.Random
) -> list[Acts]:
    x = act_features(contexts, embed(context_texts(contexts)))
    return model.decide(x, rng)


def write_turns(
    user: UserModel,
    prompts: Sequence[tuple[str, Sequence[Said]]],
    acts: Sequence[Acts] | None,
    sampling: Sampling,
) -> list[ReadTurn]:
    """One user turn per (goal, history); with ``acts``, realised as chosen (see above)."""
    from services.simulator.model import generate_turns

    def run(rows: Sequence[int], seed: int) -> list[ReadTurn]:
        messages = [
            simulator_messages(*prompts[k], acts[k] if acts is not None else None) for k in rows
        ]
        return generate_turns(
            user.runtime,
            messages,
            max_new_tokens=sampling.max_new_tokens,
            temperature=sampling.temperature,
            seed=seed,
        )

    turns = run(range(len(prompts)), sampling.seed)
    if acts is None:
        return turns
    for attempt in range(1, sampling.act_retries + 1):
        wrong = [k for k, t in enumerate(turns) if ("?" in t.text) != acts[k].question]
        if not wrong:
            break
        for k, again in zip(wrong, run(wrong, sampling.seed + 7919 * attempt), strict=True):
            if ("?" in again.text) == acts[k].question:
                turns[k] = again
    return [
        ReadTurn(t.text, a.end, "end_marker" if a.end else None)
        for t, a in zip(turns, acts, strict=True)
    ]


def rate(
    user: UserModel, assistant: Sequence[str], replies: Sequence[str], embed: Embed
) -> list[int]:
    """The predicted satisfaction level (argmax) of each exchange."""
    assert user.predictor is not None
    texts = (list(assistant), [r or "(empty)" for r in replies])
    x = user.predictor.features(embed(texts[0]), embed(texts[1]), texts)
    return [int(row.argmax()) + 1 for row in user.predictor.distribution(x)]


def simulate(
    user: UserModel,
    items: Sequence[uss.UserTurnExample],
    embed: Embed,
    sampling: Sampling,
    progress: Progress,
    stage: str,
) -> list[Simulated]:
    """The simulator's turn at each held-out context, and its predicted satisfaction with the
    real assistant turn before it (None at an opening, or without a predictor)."""
    rng = random.Random(sampling.seed)
    turns: list[ReadTurn] = []
    for start in range(0, len(items), CHUNK):
        part = items[start : start + CHUNK]
        acts = None
        if user.acts is not None:
            acts = choose_acts(user.acts, [Context.of(i) for i in part], embed, rng)
        prompts = [(i.goal, said(i.history)) for i in part]
        turns.extend(
            write_turns(user, prompts, acts, replace(sampling, seed=sampling.seed + start))
        )
        progress(start + len(part), len(items), f"measuring {stage}")
    levels: list[int | None] = [None] * len(items)
    rows = [k for k, item in enumerate(items) if item.last_system is not None]
    if rows and user.predictor is not None:
        found = rate(
            user, [items[k].last_system or "" for k in rows], [turns[k].text for k in rows], embed
        )
        for k, level in zip(rows, found, strict=True):
            levels[k] = level
    elif rows:
        _prompted(user, items, turns, rows, levels)
    return [Simulated(t.text, t.done, level) for t, level in zip(turns, levels, strict=True)]


def _prompted(
    user: UserModel,
    items: Sequence[uss.UserTurnExample],
    turns: Sequence[ReadTurn],
    rows: Sequence[int],
    levels: list[int | None],
) -> None:
    from services.simulator.model import prompted_levels
    from services.simulator.prompting import satisfaction_messages

    prompts = [
        satisfaction_messages(items[k].goal, items[k].last_system or "", turns[k].text)
        for k in rows
    ]
    for k, probs in zip(rows, prompted_levels(user.runtime, prompts), strict=True):
        levels[k] = None if probs is None else max(range(5), key=probs.__getitem__) + 1


def assistant_messages(domain: str, history: Sequence[Said]) -> list[ChatMessage]:
    """The assistant model's chat: its role, then the dialogue from its side."""
    messages: list[ChatMessage] = [
        {"role": "system", "content": ASSISTANT_ROLES.get(domain, GENERIC_ROLE)}
    ]
    for s in history:
        messages.append({"role": "user" if s.by_user else "assistant", "content": s.text})
    return messages


def simulate_dialogues(
    user: UserModel,
    assistant: Any,
    domains: Sequence[str],
    embed: Embed,
    sampling: Sampling,
    max_turns: int,
    progress: Progress,
    stage: str,
) -> list[WholeDialogue]:
    """One whole dialogue per entry of ``domains``, all advanced together one turn at a time
    (batched), until the user ends or says ``max_turns`` turns."""
    from services.simulator.model import generate_turns

    rng = random.Random(sampling.seed)
    goals = [uss.DOMAIN_GOALS.get(d, uss.GENERIC_GOAL) for d in domains]
    histories: list[list[Said]] = [[] for _ in domains]
    ended = [False] * len(domains)
    live = list(range(len(domains)))
    for index in range(max_turns):
        progress(index, max_turns, f"dialogues {stage}")
        acts = None
        if user.acts is not None:
            contexts = [_context(goals[k], histories[k]) for k in live]
            acts = choose_acts(user.acts, contexts, embed, rng)
        seed = sampling.seed + 1000 * index
        turns = write_turns(
            user, [(goals[k], histories[k]) for k in live], acts, replace(sampling, seed=seed)
        )
        for k, turn in zip(live, turns, strict=True):
            histories[k].append(Said(True, turn.text))
            ended[k] = turn.done
        live = [k for k in live if not ended[k]]
        if not live or index == max_turns - 1:
            break
        prompts = [assistant_messages(domains[k], histories[k]) for k in live]
        replies = generate_turns(
            assistant, prompts, max_new_tokens=sampling.max_new_tokens, temperature=0.0, seed=seed
        )
        for k, reply in zip(live, replies, strict=True):
            histories[k].append(Said(False, reply.text or "(no answer)"))
    progress(max_turns, max_turns, f"dialogues {stage}")
    return [
        WholeDialogue(d, tuple(s.text for s in h if s.by_user), e)
        for d, h, e in zip(domains, histories, ended, strict=True)
    ]


def _context(goal: str, history: Sequence[Said]) -> Context:
    last = next((s.text for s in reversed(history) if not s.by_user), None)
    return Context(goal, last, sum(s.by_user for s in history))
