"""A stand-in OpenAI-compatible judge server on a loopback port, written once for every test
that needs a real HTTP judge: the backend's own tests and the replica tests (issue 10).

Its routes are ``/{behaviour}/{run}/v1/chat/completions``, ``/{behaviour}/{run}/v1/completions``
(token-id prompts, echoed log-probabilities from the run's ``pair_logprobs`` table) and
``/{behaviour}/{run}/v1/models``:
``behaviour`` picks what it does on purpose (logprobs, none, 429 then success, 500s, hanging,
400, slow, slower) and ``run`` keeps the requests of one test apart in a :class:`Run` record.
It runs on its own event loop in a background thread, so separate processes (``plaudit
serve`` replicas) can call it while the test reads what it saw.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

MODEL = "stand-in-judge"
RETRY_AFTER_S = 2
HANG_S = 5.0
#: Seconds a behaviour waits before answering properly: ``slow`` makes requests overlap within
#: one process; ``slower`` makes overlap between processes certain.
DELAYS = {"hang": HANG_S, "slow": 0.05, "slower": 0.3}
#: The grade a scale prompt gets most of the probability for (``grades`` in the template).
FAVOURED_GRADE = 4


@dataclass
class Run:  # what the stand-in saw for one test
    bodies: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    in_flight: int = 0
    peak: int = 0
    completions: list[dict[str, Any]] = field(default_factory=list)
    #: ``(previous token id, token id) -> logprob`` for ``/v1/completions``; others get -9.
    pair_logprobs: dict[tuple[int, int], float] = field(default_factory=dict)
    #: Token texts for ``/v1/completions`` without echo: a prompt's next-token list holds
    #: ``token_text[t]`` for every ``(last prompt token, t)`` in ``pair_logprobs``.
    token_text: dict[int, str] = field(default_factory=dict)
    #: The ``root`` that ``/v1/models`` reports for the model (vLLM: the served directory).
    model_root: str | None = None
    #: How a text prompt of ``/v1/completions`` becomes ids, as vLLM tokenizes it with
    #: ``add_special_tokens: false`` (a test that sends texts sets the judge's tokenizer).
    tokenize: Callable[[str], list[int]] | None = None

    def ids(self, prompt: list[int] | str) -> list[int]:
        if isinstance(prompt, list):
            return prompt
        if self.tokenize is None and self.model_root is not None:  # the served directory's
            from judges.backends.sequence_scoring import ChatTokenizer

            self.tokenize = ChatTokenizer.load(self.model_root).encode
        if self.tokenize is None:
            raise AssertionError("a text prompt reached a stand-in run with no tokenizer set")
        return self.tokenize(prompt)


def chat_reply(content: str, usage: Any = None, **choice: Any) -> JSONResponse:
    """A chat completion; ``choice`` sets fields of ``choices[0]`` (``logprobs``: null)."""
    message = {"role": "assistant", "content": content}
    first = {"index": 0, "message": message, "finish_reason": "stop", "logprobs": None, **choice}
    if first.pop("drop_logprobs", False):
        del first["logprobs"]
    return JSONResponse({"object": "chat.completion", "choices": [first], "usage": usage})


def user_text(body: dict[str, Any]) -> str:
    """The first user turn: what a test's prompt says (a judge template may lead with a
    system turn)."""
    return next(str(m["content"]) for m in body["messages"] if m["role"] == "user")


def listed_tokens(body: dict[str, Any]) -> list[tuple[str, float]]:
    """The stand-in's first-token distribution: it favours the letter the prompt asks for,
    or a grade when a scale template asks for one."""
    text = user_text(body)
    if "off-format" in text:
        return [("The", -0.4), ("I", -1.6)]
    if "whole number from 1 to" in text:  # scale@1 and scale@2
        g = FAVOURED_GRADE
        return [(str(g), -0.3), (" " + str(g + 1), -1.8), (str(g - 1), -2.6), ("The", -6.0)]
    favoured, other = ("B", "A") if "pick B" in text else ("A", "B")
    return [(favoured, -0.2), (" " + favoured, -3.0), (other, -2.5), ("The", -6.0)]


def proper(body: dict[str, Any]) -> JSONResponse:
    """A well-behaved server: logprobs when asked, else a generated reply."""
    if body.get("logprobs"):
        listed = listed_tokens(body)
        entries = [{"token": t, "logprob": lp, "bytes": list(t.encode())} for t, lp in listed]
        first = {**entries[0], "top_logprobs": entries[: body["top_logprobs"]]}
        return chat_reply(listed[0][0], logprobs={"content": [first]})
    max_tokens = int(body["max_tokens"])
    return chat_reply(
        f"seed={body.get('seed')} temperature={body['temperature']}",
        usage={"prompt_tokens": 9, "completion_tokens": min(max_tokens, 8)},
        finish_reason="length" if max_tokens < 8 else "stop",
    )


def verdict_only(body: dict[str, Any], *, drop: bool = False) -> JSONResponse:
    """A server without logprobs: replies with the text after ``reply:`` in the prompt, else
    a verdict for the second label of a pairwise prompt."""
    text = user_text(body)
    if "reply:" in text:
        content = text.split("reply:", 1)[1]
    else:  # a pairwise template names its labels: "Reply with a single letter: X or Y."
        labels = re.search(r"single letter: (\w) or (\w)\.", text)
        content = f"Verdict: [[{labels[2] if labels else 'B'}]]"
    return chat_reply(content, drop_logprobs=drop)


def structured(body: dict[str, Any], behaviour: str) -> JSONResponse:
    """``n`` choices (listed last first): JSON under a ``response_format`` schema, unless the
    server ignores it; ``one-choice`` answers one choice whatever ``n`` is."""
    n = 1 if behaviour == "one-choice" else int(body.get("n", 1))
    follows = "response_format" in body and behaviour not in ("ignores-schema", "prose-verdict")
    prose = "After thought, Verdict: [[A]]" if behaviour == "prose-verdict" else None
    choices = [
        {
            "index": i,
            "message": {
                "role": "assistant",
                "content": json.dumps({"answer": i})
                if follows
                else prose or "Sure! The answer is 1.",
            },
            "finish_reason": "stop",
        }
        for i in reversed(range(n))
    ]
    usage = {"prompt_tokens": 5, "completion_tokens": 4 * n}
    return JSONResponse(
        {"id": "c", "object": "chat.completion", "choices": choices, "usage": usage}
    )


CONTEXT_LENGTH_ERROR = (
    "This model's maximum context length is 2048 tokens. However, you requested 4100 tokens "
    "(4099 in the messages, 1 in the completion). Please reduce the length of the messages."
)
UNLISTED_PAIR_LOGPROB = -9.0
#: ``context-length``: a chat prompt longer than this many characters, or a token-id prompt
#: longer than this many tokens, is refused with vLLM's HTTP 400.
TOO_LONG_CHARS, TOO_LONG_TOKENS = 2000, 400


def next_tokens(run: Run, body: dict[str, Any]) -> JSONResponse:
    """Each token-id prompt's next-token list (legacy completions shape), from the run's
    ``pair_logprobs`` after the prompt's last token."""
    choices = []
    for index, prompt in enumerate(body["prompt"]):
        ids = run.ids(prompt)
        tops = {
            run.token_text.get(token, str(token)): logprob
            for (previous, token), logprob in run.pair_logprobs.items()
            if previous == ids[-1]
        }
        best = max(tops, key=tops.__getitem__) if tops else "x"
        logprobs = {
            "tokens": [best],
            "token_logprobs": [tops.get(best, -0.5)],
            "top_logprobs": [tops],
        }
        choices.append(
            {"index": index, "text": best, "logprobs": logprobs, "finish_reason": "length"}
        )
    return JSONResponse({"object": "text_completion", "choices": list(reversed(choices))})


def echoed(run: Run, body: dict[str, Any]) -> JSONResponse:
    """A completion per token-id prompt with its prompt log-probabilities echoed, looked up
    in ``run.pair_logprobs`` (the first token has none, as on vLLM)."""
    choices = []
    for index, prompt in enumerate(body["prompt"]):
        ids = run.ids(prompt)
        values: list[float | None] = [None]
        for previous, token in itertools.pairwise(ids):
            values.append(run.pair_logprobs.get((previous, token), UNLISTED_PAIR_LOGPROB))
        tokens = [str(t) for t in ids]
        if body.get("max_tokens", 16) > 0:  # the generated token
            tokens, values = [*tokens, "x"], [*values, -0.5]
        logprobs = {"tokens": tokens, "token_logprobs": values, "top_logprobs": None}
        choices.append(
            {"index": index, "text": "x", "logprobs": logprobs, "finish_reason": "length"}
        )
    return JSONResponse({"object": "text_completion", "choices": list(reversed(choices))})


#: The ``memory`` behaviour's latency, as a GPU server of a mid-size model answers one request:
#: time to the first token, then tokens per second (issue 24's production-shape benchmark).
FIRST_TOKEN_S = 0.2
TOKENS_PER_S = 50.0
_CRITERION_LINE = re.compile(
    r"^(c\d+) \((required|pitfall), weight [^)]*?(, ANCHOR)?\): (.*)$", re.M
)


def memory_value(body: dict[str, Any], take: int) -> dict[str, Any]:
    """What the memory's analyst or editor would answer: schema-valid JSON. The editor rewords
    the first criterion that is not an anchor (a new wording each call, so the checks accept
    it unless it undoes an earlier one), so an edit applies."""
    schema = body["response_format"]["json_schema"]["schema"]
    if "went_right" in schema["properties"]:
        return {
            "went_right": "The answer names the place and one of its sounds.",
            "went_wrong": "It repeats a few words and gives no detail of the place.",
            "hacking": False,
        }
    target = next(
        (m.group(1) for m in _CRITERION_LINE.finditer(user_text(body)) if not m.group(3)), "c2"
    )
    wording = f"Describes at least one distinct sound heard at the place (wording {take})"
    operation = {"op": "reword", "id": target, "text": wording, "weight": 0}
    return {"operations": [operation], "rationale": "The criterion saturated; make it specific."}


async def memory_reply(body: dict[str, Any], take: int) -> JSONResponse:
    """The analyst's or editor's JSON after a realistic generation time."""
    content = json.dumps(memory_value(body, take))
    tokens = max(1, len(content) // 4)
    await asyncio.sleep(FIRST_TOKEN_S + tokens / TOKENS_PER_S)
    return chat_reply(content, usage={"prompt_tokens": 400, "completion_tokens": tokens})


def error(code: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "code": code}}, code, headers=headers)


async def behave(behaviour: str, run: Run, body: dict[str, Any]) -> Response:
    """What the stand-in does on purpose; anything not singled out answers properly."""
    count = len(run.bodies)
    if behaviour == "rejects-logprobs" and body.get("logprobs"):
        return error(400, "logprobs are not supported for this model")
    if behaviour in ("null-logprobs", "absent-logprobs", "rejects-logprobs"):
        return verdict_only(body, drop=behaviour == "absent-logprobs")
    if behaviour == "rate-limited" and count == 1:
        return error(429, "slow down", {"Retry-After": str(RETRY_AFTER_S)})
    if behaviour.startswith("fail500x") and count <= int(behaviour.removeprefix("fail500x")):
        return error(500, "internal error")
    if behaviour == "context-length" and len(user_text(body)) > TOO_LONG_CHARS:
        return error(400, CONTEXT_LENGTH_ERROR)
    if behaviour == "bad-request":
        return error(400, "unknown field 'frobnicate'")
    if behaviour == "not-json":
        return Response("<html>gateway</html>", 200, media_type="text/html")
    if behaviour in ("structured", "ignores-schema", "one-choice", "prose-verdict"):
        return structured(body, behaviour)
    if behaviour == "memory" and "response_format" in body:
        return await memory_reply(body, count)
    await asyncio.sleep(DELAYS.get(behaviour, 0))
    return proper(body)


def stand_in_app(runs: dict[str, Run]) -> FastAPI:
    """The stand-in's routes; every chat call is recorded in ``runs[run_id]``."""
    app = FastAPI()

    @app.post("/{behaviour}/{run_id}/v1/chat/completions")
    async def chat(behaviour: str, run_id: str, request: Request) -> Response:
        run = runs.setdefault(run_id, Run())
        body = await request.json()
        run.bodies.append(body)
        run.headers.append(dict(request.headers))
        run.in_flight += 1
        run.peak = max(run.peak, run.in_flight)
        try:
            return await behave(behaviour, run, body)
        finally:
            run.in_flight -= 1

    @app.post("/{behaviour}/{run_id}/v1/completions")
    async def completions(behaviour: str, run_id: str, request: Request) -> Response:
        run = runs.setdefault(run_id, Run())
        body = await request.json()
        run.completions.append(body)
        longest = max(len(run.ids(p)) for p in body["prompt"])
        if behaviour == "context-length" and longest > TOO_LONG_TOKENS:
            return error(400, CONTEXT_LENGTH_ERROR)
        if behaviour in ("null-logprobs", "absent-logprobs"):
            return JSONResponse(
                {
                    "choices": [
                        {"index": i, "text": "x", "logprobs": None}
                        for i in range(len(body["prompt"]))
                    ]
                }
            )
        return echoed(run, body) if body.get("echo") else next_tokens(run, body)

    @app.get("/{behaviour}/{run_id}/v1/models")
    async def models(behaviour: str, run_id: str) -> Response:
        if behaviour == "no-models":
            return JSONResponse({"object": "list", "data": []})
        card = {"id": MODEL, "object": "model", "root": runs.get(run_id, Run()).model_root}
        return JSONResponse({"object": "list", "data": [card]})

    return app


@dataclass
class StandIn:
    """A running stand-in: its port and what each run saw."""

    port: int
    runs: dict[str, Run]

    def url(self, behaviour: str, run_id: str) -> str:
        """The base URL (with ``/v1``) a client of one run and behaviour is configured with."""
        return f"http://127.0.0.1:{self.port}/{behaviour}/{run_id}/v1"

    def run(self, run_id: str) -> Run:
        """What the run saw so far (an empty record before its first call)."""
        return self.runs.get(run_id, Run())


@contextlib.contextmanager
def stand_in_server(within: float = 20.0) -> Iterator[StandIn]:
    """The stand-in, listening on a free loopback port in a background thread until the
    block exits. The socket is bound before the thread starts, so the port cannot be lost
    to another process in between."""
    runs: dict[str, Run] = {}
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(
        stand_in_app(runs), log_level="warning", lifespan="off", timeout_graceful_shutdown=1
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + within
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the stand-in judge server did not start")
            time.sleep(0.01)
        yield StandIn(sock.getsockname()[1], runs)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
