"""How the simulator's language model reads a dialogue, and how its output is read back.

The simulator plays the *user*, so the dialogue is shown to the chat model with the roles
swapped: the real user's messages become the model's own (``assistant``) turns and the
assistant's become the turns it answers (``user``); the next ``assistant`` turn it writes is
the simulated user's message. The same layout is used to calibrate (LoRA on the real user's
turns) and to simulate, so a calibration learns exactly what the turn endpoint asks for.

A user who ends the conversation says so with :data:`END_MARKER` at the end of the message
(calibration appends it to every dialogue's last user turn); a short closing phrase
("that's all, thanks", "bye") also counts, which is how the prompted simulator usually ends.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from judges.backends.base import ChatMessage
from services.simulator.acts import Acts

END_MARKER = "[END]"
#: Turns of the dialogue shown to the model (older ones are dropped): bounds the prompt.
MAX_HISTORY = 8
OPENING_CUE = "(The conversation starts. Write your first message.)"
#: Satisfaction candidates, as the prompted estimate scores them.
LEVELS = ("1", "2", "3", "4", "5")

_CLOSING = re.compile(
    r"\b(good ?bye|bye|that'?s all|that is all|that will be all|that'?ll be all|nothing else|"
    r"no,? thanks?|no,? thank you|i'?m all set|that'?s everything)\b",
    re.IGNORECASE,
)
#: Longer messages that contain a closing phrase are usually new requests, not goodbyes.
_CLOSING_MAX_WORDS = 12


def system_prompt(goal: str, acts: Acts | None = None) -> str:
    return (
        "You are role-playing a USER talking to an assistant. You are not the assistant.\n"
        f"Your situation: {goal}\n"
        "Write only the user's next message, short and in your own words. When you have "
        f"what you need, say goodbye and end the message with {END_MARKER}."
        + (f"\n{act_line(acts)}" if acts is not None else "")
    )


def act_line(acts: Acts) -> str:
    """The calibrated simulator's instruction for the acts of the next turn (issue 24: the
    LoRA learns it from the real turn's acts, the act model chooses it when simulating)."""
    ask = "ask a question" if acts.question else "do not ask a question"
    if acts.end:
        return f"Next message: {ask}, and end the conversation with {END_MARKER}."
    return f"Next message: {ask}, and do not end the conversation."


@dataclass(frozen=True, slots=True)
class Said:
    """One message of the dialogue from the user's point of view."""

    by_user: bool
    text: str


def simulator_messages(
    goal: str, history: Sequence[Said], acts: Acts | None = None
) -> list[ChatMessage]:
    """The chat the simulator's model continues (roles swapped, last :data:`MAX_HISTORY`;
    ``acts``: the calibrated simulator's choice for the next turn)."""
    shown = list(history)[-MAX_HISTORY:]
    messages: list[ChatMessage] = [{"role": "system", "content": system_prompt(goal, acts)}]
    if not shown or shown[0].by_user:
        messages.append({"role": "user", "content": OPENING_CUE})
    for said in shown:
        role: Literal["user", "assistant"] = "assistant" if said.by_user else "user"
        if messages[-1]["role"] == role:  # never two turns of one role in a row
            messages[-1] = {"role": role, "content": f"{messages[-1]['content']}\n{said.text}"}
        else:
            messages.append({"role": role, "content": said.text})
    return messages


def target_text(text: str, is_last: bool) -> str:
    """What calibration teaches the model to write for a real user turn."""
    return f"{text} {END_MARKER}" if is_last else text


@dataclass(frozen=True, slots=True)
class ReadTurn:
    text: str
    done: bool
    done_reason: str | None  # "end_marker", "closing_phrase" or None


def read_turn(generated: str) -> ReadTurn:
    """The user's message (marker removed, first line of role-play kept) and whether it ends
    the conversation."""
    text = generated.strip()
    for prefix in ("User:", "user:", "USER:"):
        if text.startswith(prefix):
            text = text[len(prefix) :].strip()
    if END_MARKER in text:
        text = text.replace(END_MARKER, " ").strip()
        return ReadTurn(" ".join(text.split()), True, "end_marker")
    text = " ".join(text.split())
    if text and len(text.split()) <= _CLOSING_MAX_WORDS and _CLOSING.search(text):
        return ReadTurn(text, True, "closing_phrase")
    return ReadTurn(text, False, None)


def satisfaction_messages(goal: str, assistant: str, reply: str | None) -> list[ChatMessage]:
    """The prompted estimate of the uncalibrated simulator: a 1-5 rating of the assistant's
    last turn from the user's side, scored over the five digits."""
    said = f"\nThe user answered: {reply}" if reply else ""
    return [
        {
            "role": "system",
            "content": "You rate how satisfied a user is with an assistant's reply, from 1 "
            "(very dissatisfied) to 5 (very satisfied). Answer with one digit.",
        },
        {
            "role": "user",
            "content": f"The user's situation: {goal}\nThe assistant said: {assistant}{said}\n"
            "How satisfied is the user (1-5)?",
        },
    ]
