"""Chat-templated prompt text turned back into a conversation (issue 10), as wire messages.

The parsing lives in ``plaudit_wire.templates``, shared with the client's OpenRLHF
python-file adapter so that both unwrap a prompt the same way (issue 22).
"""

from __future__ import annotations

from dataclasses import dataclass

from plaudit_wire.schemas import Message
from plaudit_wire.templates import TEMPLATES
from plaudit_wire.templates import unwrap_prompt as _unwrap

__all__ = ["TEMPLATES", "Unwrapped", "unwrap_prompt"]


@dataclass(frozen=True)
class Unwrapped:
    """A prompt after unwrapping: the text or messages, and which template was recognised."""

    prompt: str | list[Message]
    template: str | None


def unwrap_prompt(text: str, *, keep_system: bool = False, truncated: bool = False) -> Unwrapped:
    """The conversation inside a chat-templated prompt, or the text unchanged.

    >>> unwrap_prompt("<|im_start|>user\\n2+2?<|im_end|>\\n<|im_start|>assistant\\n").prompt
    '2+2?'
    """
    found = _unwrap(text, keep_system=keep_system, truncated=truncated)
    if isinstance(found.prompt, str):
        return Unwrapped(found.prompt, found.template)
    return Unwrapped([Message.model_validate(m) for m in found.prompt], found.template)
