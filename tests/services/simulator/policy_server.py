"""A real OpenAI-compatible chat server for episode tests: ``POST /v1/chat/completions``
answered by the embedded SmolLM2-135M (its own copy, loaded in the server's thread), served by
uvicorn on a loopback port. ``/broken/v1/chat/completions`` answers HTTP 500, to test how an
episode ends when the policy fails."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from judges.backends.base import GenerateRequest
from judges.backends.hf_runtime import HFRuntime
from tests.serving import free_port


def policy_app(model_dir: Path) -> FastAPI:
    runtime = HFRuntime.load(model_dir, max_batch_size=4)
    lock = threading.Lock()
    app = FastAPI()
    app.state.calls = []

    @app.post("/v1/chat/completions")
    def chat(body: dict[str, Any]) -> dict[str, Any]:
        app.state.calls.append(body)
        request = GenerateRequest(
            messages=body["messages"],
            max_new_tokens=int(body.get("max_tokens", 64)),
            temperature=float(body.get("temperature", 0.0)),
        )
        with lock:
            [result] = runtime.generate([request])
        message = {"role": "assistant", "content": result.text}
        choice = {"index": 0, "message": message, "finish_reason": result.finish_reason}
        return {"object": "chat.completion", "model": body["model"], "choices": [choice]}

    @app.post("/broken/v1/chat/completions")
    async def broken(request: Request) -> JSONResponse:
        return JSONResponse({"error": {"message": "policy crashed"}}, status_code=500)

    return app


@contextlib.contextmanager
def serving(app: FastAPI) -> Iterator[str]:
    """The app on a free loopback port until the block exits; yields its base URL."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join()
