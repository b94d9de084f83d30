"""Chat-templated prompt text turned back into a conversation (issue 10).

Shared by the server's ``/get_reward`` and ``/slime/reward`` (``services/protocols/templates.py``
wraps it) and the client's OpenRLHF python-file adapter, so that both judge the same prompt the
same way (issue 22: the adapter sent the templated text and two samples swapped ranks).

OpenRLHF posts the decoded prompt with its special tokens, and slime with
``--apply-chat-template`` posts the templated prompt. Given to the judge as is, the policy's
control tokens and its system prompt ("You are a helpful AI assistant named SmolLM...") become
part of the question, and the judge's tokenizer reads them as its own control tokens. Here the
text is parsed back into messages for the chat templates in common use, the policy's system
prompt is dropped unless asked for, and a conversation of one user turn becomes plain text, so
the judge sees exactly what it sees for the plain prompt.

Text that no template parses completely (anything outside the turns besides whitespace and
begin-of-text tokens) is left alone: a prompt that merely mentions ``<|im_start|>`` is not
rewritten.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

Role = str
Turn = tuple[Role, str]
Message = dict[str, str]  # {"role": ..., "content": ...}

#: Begin-of-text tokens a decoded prompt may start with.
_LEADING = re.compile(r"^(?:\s|<s>|<bos>|<\|begin_of_text\|>|<\|startoftext\|>)*")


@dataclass(frozen=True)
class Unwrapped:
    """A prompt after unwrapping: the text or messages, and which template was recognised."""

    prompt: str | list[Message]
    template: str | None


def _covered(text: str, spans: list[tuple[int, int]]) -> bool:
    """Whether the matches cover ``text`` except for whitespace between them."""
    at = 0
    for start, end in spans:
        if text[at:start].strip():
            return False
        at = end
    return not text[at:].strip()


def _turns(text: str, turn: re.Pattern[str], roles: dict[str, Role]) -> list[Turn] | None:
    matches = list(turn.finditer(text))
    if not matches or not _covered(text, [m.span() for m in matches]):
        return None
    return [(roles.get(m["role"], m["role"]), m["content"]) for m in matches]


_CHATML = re.compile(
    r"<\|im_start\|>(?P<role>system|user|assistant)(?:\n|<\|im_sep\|>)"
    r"(?P<content>.*?)(?:<\|im_end\|>|(?=<\|im_start\|>)|\Z)",
    re.DOTALL,
)
_LLAMA3 = re.compile(
    r"<\|start_header_id\|>(?P<role>system|user|assistant)<\|end_header_id\|>\n\n"
    r"(?P<content>.*?)(?:<\|eot_id\|>|(?=<\|start_header_id\|>)|\Z)",
    re.DOTALL,
)
_GEMMA = re.compile(
    r"<start_of_turn>(?P<role>user|model|system)\n"
    r"(?P<content>.*?)(?:<end_of_turn>|(?=<start_of_turn>)|\Z)",
    re.DOTALL,
)
# Phi-3 (<|end|>) and Zephyr/TinyLlama (</s>) share the <|role|> headers.
_PHI = re.compile(
    r"<\|(?P<role>system|user|assistant)\|>\n?"
    r"(?P<content>.*?)(?:<\|end\|>|</s>|(?=<\|(?:system|user|assistant)\|>)|\Z)",
    re.DOTALL,
)
_MISTRAL_SYSTEM = re.compile(r"\[SYSTEM_PROMPT\](?P<content>.*?)\[/SYSTEM_PROMPT\]", re.DOTALL)
_MISTRAL_TURN = re.compile(
    r"\[INST\](?P<user>.*?)\[/INST\](?P<reply>.*?)(?:</s>|(?=\[INST\])|\Z)", re.DOTALL
)
# Llama 2 (and Mistral's first releases) put the system prompt inside the first [INST].
_LLAMA2_SYSTEM = re.compile(r"^\s*<<SYS>>\n?(?P<system>.*?)\n?<</SYS>>\s*", re.DOTALL)


def _chatml(text: str) -> list[Turn] | None:
    return _turns(text, _CHATML, {})


def _llama3(text: str) -> list[Turn] | None:
    return _turns(text, _LLAMA3, {})


def _gemma(text: str) -> list[Turn] | None:
    return _turns(text, _GEMMA, {"model": "assistant"})


def _phi(text: str) -> list[Turn] | None:
    return _turns(text, _PHI, {})


def _mistral(text: str) -> list[Turn] | None:
    turns: list[Turn] = []
    spans: list[tuple[int, int]] = []
    system = _MISTRAL_SYSTEM.search(text)
    if system is not None:
        turns.append(("system", system["content"]))
        spans.append(system.span())
    for match in _MISTRAL_TURN.finditer(text, system.end() if system else 0):
        user = match["user"]
        legacy = _LLAMA2_SYSTEM.match(user) if not turns else None
        if legacy is not None:
            turns.append(("system", legacy["system"]))
            user = user[legacy.end() :]
        turns.append(("user", user))
        if match["reply"].strip():
            turns.append(("assistant", match["reply"]))
        spans.append(match.span())
    if not any(role == "user" for role, _ in turns) or not _covered(text, spans):
        return None
    return turns


#: Tried in order; each needs its own markers, so at most one parses a given text. Each comes
#: with where its turns start, for a prompt cut from the left in the middle of a turn.
TEMPLATES: tuple[tuple[str, Callable[[str], list[Turn] | None], re.Pattern[str]], ...] = (
    ("llama3", _llama3, re.compile(r"<\|start_header_id\|>")),
    ("chatml", _chatml, re.compile(r"<\|im_start\|>")),
    ("gemma", _gemma, re.compile(r"<start_of_turn>")),
    ("mistral", _mistral, re.compile(r"\[SYSTEM_PROMPT\]|\[INST\]")),
    ("phi", _phi, re.compile(r"<\|(?:system|user|assistant)\|>")),
)
#: What may close the cut-off turn before the first whole one.
_TURN_ENDS = re.compile(r"(?:<\|im_end\|>|<\|eot_id\|>|<end_of_turn>|<\|end\|>|</s>|\s)+\Z")


def unwrap_prompt(text: str, *, keep_system: bool = False, truncated: bool = False) -> Unwrapped:
    """The conversation inside a chat-templated prompt, or the text unchanged.

    ``truncated``: the text was cut from the left (OpenRLHF's prompt limit), so it may start
    inside a turn; that fragment is kept as the start of the conversation, in a user turn.

    >>> unwrap_prompt("<|im_start|>system\\nBe brief.<|im_end|>\\n"
    ...               "<|im_start|>user\\n2+2?<|im_end|>\\n<|im_start|>assistant\\n")
    Unwrapped(prompt='2+2?', template='chatml')
    >>> unwrap_prompt("What is <|im_start|>?").template is None
    True
    """
    body = text[_LEADING.match(text).end() :]  # type: ignore[union-attr]
    for name, parse, starts in TEMPLATES:
        turns = parse(body)
        if turns is None and truncated:
            turns = _after_fragment(body, parse, starts)
        if turns is None:
            continue
        messages = _messages(turns, keep_system=keep_system)
        if messages is None:
            continue
        if len(messages) == 1 and messages[0]["role"] == "user":
            return Unwrapped(messages[0]["content"], name)
        return Unwrapped(messages, name)
    return Unwrapped(text, None)


def _after_fragment(
    body: str, parse: Callable[[str], list[Turn] | None], starts: re.Pattern[str]
) -> list[Turn] | None:
    first = starts.search(body)
    if first is None or first.start() == 0:
        return None
    turns = parse(body[first.start() :])
    if turns is None:
        return None
    fragment = body[: first.start()]
    closing = _TURN_ENDS.search(fragment)
    if closing is not None:
        fragment = fragment[: closing.start()]
    return [("user", "..." + fragment.strip()), *turns]


def _messages(turns: list[Turn], *, keep_system: bool) -> list[Message] | None:
    """Turns as messages: trimmed, the empty generation prompt at the end dropped, the system
    turn dropped unless kept; None when no user turn is left."""
    kept: list[Turn] = []
    for role, content in turns:
        if role not in ("system", "user", "assistant"):
            return None
        if role == "system" and not keep_system:
            continue
        kept.append((role, content.strip()))
    while kept and kept[-1][0] == "assistant" and not kept[-1][1]:
        kept.pop()
    if not any(role == "user" for role, _ in kept) or not all(content for _, content in kept):
        return None
    return [{"role": r, "content": c} for r, c in kept]
