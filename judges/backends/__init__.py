"""Judge backends: the :class:`JudgeBackend` contract and its request/result types.

The local transformers backend is imported explicitly (it pulls in torch)::

    from judges.backends.local import LocalBackend
"""

from judges.backends.base import (
    BackendInfo,
    ChatMessage,
    ChoiceRequest,
    ChoiceResult,
    FinishReason,
    GeneratedText,
    GenerateRequest,
    GenerateResult,
    ItemStatus,
    JudgeBackend,
    system,
    user,
)

__all__ = [
    "BackendInfo",
    "ChatMessage",
    "ChoiceRequest",
    "ChoiceResult",
    "FinishReason",
    "GenerateRequest",
    "GenerateResult",
    "GeneratedText",
    "ItemStatus",
    "JudgeBackend",
    "system",
    "user",
]
