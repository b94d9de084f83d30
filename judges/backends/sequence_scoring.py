"""Score choice candidates by their whole token sequence on an OpenAI-compatible server.

Reading a 1..K grade from the first generated token cannot see a grade of two tokens ("10"
is ``1``, ``0`` for SmolLM2 and Qwen tokenizers), so grade 10 got a floor value and "1" took
its probability (issue 19). Here every candidate is teacher-forced instead, as the local and
in-process vLLM backends do: one prompt per candidate, ``prompt ids + candidate ids``, sent as
token ids to ``/v1/completions`` with ``echo`` and ``logprobs``, and the log-probabilities of
the candidate's own positions are summed. When one candidate's tokens are a prefix of
another's (``"1"`` and ``"10"``) every candidate ends with the end-of-sequence token, so
``"1"`` means "exactly 1". All rows of a batch go out in a list of prompts (vLLM and SGLang
take one), rows of one prompt next to each other so the server's prefix cache sees them
together.

The prompt ids come from the judge's own tokenizer and chat template (:class:`ChatTokenizer`),
built exactly as :mod:`judges.backends.hf_runtime` builds them, so the same weights give the
same numbers on every backend.

Example::

    tokenizer = ChatTokenizer.load("/data/models/Qwen2.5-7B-Instruct")
    rows = forced_rows(tokenizer, ChoiceRequest([user("Grade 1-10")], ["1", "10"]))
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from judges.backends.base import ChatMessage, ChoiceRequest, ChoiceResult, validate_choice

#: Two stand-in contents: a template that renders both in the same frame places content
#: verbatim (see :meth:`ChatTokenizer.prompt_text`).
_CONTENT_MARKS = ("<<plaudit-content-7f3a>>", "<<plaudit-content-c91e>>")


class ChatTokenizer:
    """The judge model's tokenizer and chat template (a ``transformers`` tokenizer inside)."""

    def __init__(self, tokenizer: Any) -> None:
        if tokenizer.eos_token_id is None:
            raise ValueError("the tokenizer defines no end-of-sequence token")
        self._tokenizer = tokenizer
        self.end_id = int(tokenizer.eos_token_id)
        self._candidates: dict[str, list[int]] = {}
        self._frames: dict[tuple[tuple[str, str], ...], tuple[str, str] | None] = {}
        self._tails: dict[tuple[str, ...], list[list[int]] | None] = {}

    @classmethod
    def load(cls, path: str) -> ChatTokenizer:
        """The tokenizer of a local HF model directory (imports ``transformers`` lazily)."""
        from transformers import AutoTokenizer

        return cls(AutoTokenizer.from_pretrained(path))

    def prompt_text(self, messages: Sequence[ChatMessage], assistant_prefix: str = "") -> str:
        """``messages`` rendered with the chat template and an open assistant turn, then the
        prefix: the text whose tokens :meth:`prompt_ids` gives.

        The template runs once per distinct head (every message but a last user turn): the
        rendering is cut around that turn's content, and each prompt with the same head is
        the cut pieces around its own content (a G=8 tournament's 56 prompts share one head;
        issue 19: templates rendered once per group). A template that does not place the
        content verbatim, or content with edge whitespace a template might trim, is rendered
        whole.
        """
        *head, last = messages
        content = last["content"]
        if last["role"] == "user" and content == content.strip():
            frame = self._frame(tuple(head))
            if frame is not None:
                return frame[0] + content + frame[1] + assistant_prefix
        return self._render(messages) + assistant_prefix

    def _frame(self, head: tuple[ChatMessage, ...]) -> tuple[str, str] | None:
        key = tuple((m["role"], m["content"]) for m in head)
        if key in self._frames:
            return self._frames[key]
        turns = list(head)
        cuts = []
        for mark in _CONTENT_MARKS:
            pieces = self._render([*turns, ChatMessage(role="user", content=mark)]).split(mark)
            cuts.append((pieces[0], pieces[1]) if len(pieces) == 2 else None)
        frame = cuts[0] if cuts[0] is not None and cuts[0] == cuts[1] else None
        if len(self._frames) >= 1024:
            self._frames.clear()
        self._frames[key] = frame
        return frame

    def _render(self, messages: Sequence[ChatMessage]) -> str:
        text: str = self._tokenizer.apply_chat_template(
            [dict(m) for m in messages], tokenize=False, add_generation_prompt=True
        )
        return text

    def prompt_ids(self, messages: Sequence[ChatMessage], assistant_prefix: str = "") -> list[int]:
        """``messages`` with the chat template and an open assistant turn, then the prefix."""
        return self.encode(self.prompt_text(messages, assistant_prefix))

    def encode(self, text: str) -> list[int]:
        """``text``'s ids with no special tokens added (a rendered template has its own)."""
        ids: list[int] = self._tokenizer.encode(text, add_special_tokens=False)
        return ids

    def candidate_ids(self, candidate: str) -> list[int]:
        """A candidate's ids, tokenized on its own (remembered: a judge has few candidates)."""
        known = self._candidates.get(candidate)
        if known is None:
            known = self.encode(candidate)
            if len(self._candidates) < 4096:
                self._candidates[candidate] = known
        return list(known)

    def tails(self, candidates: Sequence[str]) -> list[list[int]] | None:
        """The ids each candidate adds after the prompt (ending with the end-of-sequence id
        when one candidate's ids are a prefix of another's); None when one has no ids.

        Remembered per candidate list: a G=8 tournament asks it 56 times for the same two
        labels, and the prefix check was a seventh of the group route's CPU (issue 19).
        """
        key = tuple(candidates)
        if key not in self._tails:
            if len(self._tails) >= 1024:
                self._tails.clear()
            self._tails[key] = self._tails_of(key)
        known = self._tails[key]
        return None if known is None else [list(ids) for ids in known]

    def _tails_of(self, candidates: Sequence[str]) -> list[list[int]] | None:
        tails = [self.candidate_ids(c) for c in candidates]
        if any(not ids for ids in tails):
            return None
        if has_prefix_pair(tails):
            tails = [[*ids, self.end_id] for ids in tails]
        return tails


def local_tokenizer_dir(path: str) -> bool:
    """True when ``path`` is a directory here with a tokenizer in it."""
    folder = Path(path)
    return folder.is_dir() and (folder / "tokenizer_config.json").is_file()


@dataclass(frozen=True, slots=True)
class ForcedRows:
    """One request's rows: ``prompt + candidate`` ids per candidate, and each tail's length."""

    rows: list[list[int]]
    tails: list[int]


def forced_rows(tokenizer: ChatTokenizer, request: ChoiceRequest) -> ForcedRows | ChoiceResult:
    """The teacher-forcing rows of a request, or an ``invalid`` result saying why not."""
    problem = validate_choice(request)
    if problem:
        return ChoiceResult.failed("invalid", problem)
    tails = tokenizer.tails(request.candidates)
    if tails is None:
        return ChoiceResult.failed("invalid", "a candidate encodes to no tokens")
    prompt = tokenizer.prompt_ids(request.messages, request.assistant_prefix)
    return ForcedRows([prompt + tail for tail in tails], [len(tail) for tail in tails])


def has_prefix_pair(tokenized: Sequence[Sequence[int]]) -> bool:
    """True when some candidate's tokens are a proper prefix of another's."""
    return any(
        len(a) < len(b) and list(b[: len(a)]) == list(a) for a in tokenized for b in tokenized
    )


def completions_body(
    model: str, rows: Sequence[list[int]], extra: Mapping[str, Any]
) -> dict[str, Any]:
    """The ``/v1/completions`` body that echoes every row's prompt log-probabilities.

    ``max_tokens`` is 1 because not every server accepts 0; the generated token is ignored.
    """
    return {
        **extra,
        "model": model,
        "prompt": [list(row) for row in rows],
        "max_tokens": 1,
        "temperature": 0.0,
        "echo": True,
        "logprobs": 0,
    }


def next_token_body(
    model: str, prompts: Sequence[list[int] | str], top: int, extra: Mapping[str, Any]
) -> dict[str, Any]:
    """The ``/v1/completions`` body that lists each prompt's ``top`` likeliest next tokens.

    Prompts are token ids, or texts already rendered with the chat template; a text is
    tokenized by the server without special tokens added (vLLM's ``add_special_tokens``), so
    it becomes the same ids. No ``echo``: vLLM skips its prefix cache for requests that ask
    for prompt logprobs, and these prompts share long heads (one template, one question)
    that the cache should keep.
    """
    texts = any(isinstance(p, str) for p in prompts)
    body = {
        **extra,
        "model": model,
        "prompt": [p if isinstance(p, str) else list(p) for p in prompts],
        "max_tokens": 1,
        "temperature": 0.0,
        "logprobs": top,
    }
    if texts:
        body["add_special_tokens"] = False
    return body


def next_token_lists(body: Mapping[str, Any], count: int) -> list[dict[str, float]] | str:
    """Each prompt's token -> logprob list for its first generated token (the legacy
    completions shape: ``top_logprobs[0]`` maps token text to logprob), or why not."""
    choices = body.get("choices")
    if not isinstance(choices, list) or len(choices) != count:
        return f"asked about {count} prompts, the server answered {_count(choices)}"
    ordered = sorted(choices, key=lambda c: c.get("index", 0) if isinstance(c, dict) else 0)
    lists = []
    for choice in ordered:
        listed = _first_listed(choice)
        if not listed:
            return "the response has no logprobs"
        lists.append(listed)
    return lists


_FLOATS = {float}


def _first_listed(choice: Any) -> dict[str, float]:
    try:
        logprobs = choice["logprobs"]
        tops = logprobs.get("top_logprobs") or [{}]
        first: dict[Any, Any] = tops[0] or {}
        # Parsed JSON holds floats already: read as it is, not copied (a G=8 reply lists over
        # 1,000 tokens; issue 19). Anything else is converted.
        if type(first) is dict and set(map(type, first.values())) <= _FLOATS:
            listed: dict[str, float] = first
        else:
            listed = {str(t): float(lp) for t, lp in first.items()}
        if logprobs.get("tokens") and logprobs.get("token_logprobs"):
            sampled, value = str(logprobs["tokens"][0]), logprobs["token_logprobs"][0]
            if value is not None:
                value = float(value)  # a malformed value still fails the list, as it did
                if sampled not in listed:
                    listed = {**listed, sampled: value}  # the reply's own dict stays as it is
        return listed
    except (KeyError, IndexError, TypeError, ValueError, AttributeError):
        return {}


def tail_logprobs(
    body: Mapping[str, Any], rows: Sequence[list[int]], tails: Sequence[int]
) -> list[float] | str:
    """The summed log-probability of each row's last ``tails[i]`` prompt tokens, or why the
    reply cannot give it (choices missing, or no prompt log-probabilities echoed)."""
    choices = body.get("choices")
    if not isinstance(choices, list) or len(choices) != len(rows):
        return f"asked to score {len(rows)} prompts, the server answered {_count(choices)}"
    ordered = sorted(choices, key=lambda c: c.get("index", 0) if isinstance(c, dict) else 0)
    sums: list[float] = []
    for choice, row, tail in zip(ordered, rows, tails, strict=True):
        values = _echoed(choice)
        if values is None or len(values) < len(row):
            return "the server echoed no prompt log-probabilities"
        picked = values[len(row) - tail : len(row)]
        if any(v is None for v in picked):
            return "the server echoed no log-probability for a candidate token"
        sums.append(math.fsum(float(v) for v in picked if v is not None))
    return sums


def _echoed(choice: Any) -> list[float | None] | None:
    logprobs = choice.get("logprobs") if isinstance(choice, dict) else None
    values = logprobs.get("token_logprobs") if isinstance(logprobs, dict) else None
    return values if isinstance(values, list) else None


def _count(choices: Any) -> int:
    return len(choices) if isinstance(choices, list) else 0
