"""The assistant side of an episode: any OpenAI-compatible chat server (``/chat/completions``).

A failure of the policy (unreachable, an HTTP error, an answer without a message) ends the
episode with ``termination: "policy_error"`` and the reason; it is the policy's state, not the
simulator's, so it is never an error of the request.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx

from plaudit_wire.simulator import PolicySpec
from services.simulator.prompting import Said


class PolicyError(Exception):
    pass


class PolicyClient:
    def __init__(
        self, spec: PolicySpec, *, timeout_s: float, client: httpx.AsyncClient | None = None
    ) -> None:
        self.spec = spec
        headers = {"Authorization": f"Bearer {spec.api_key}"} if spec.api_key else {}
        self._client = client or httpx.AsyncClient(timeout=timeout_s, headers=headers)
        self._owned = client is None
        self._url = spec.base_url.rstrip("/") + "/chat/completions"

    def messages(self, history: Sequence[Said]) -> list[dict[str, str]]:
        head = (
            [{"role": "system", "content": self.spec.system_prompt}]
            if self.spec.system_prompt
            else []
        )
        return head + [
            {"role": "user" if s.by_user else "assistant", "content": s.text} for s in history
        ]

    async def reply(self, history: Sequence[Said]) -> str:
        body: dict[str, Any] = {
            "model": self.spec.model,
            "messages": self.messages(history),
            "temperature": self.spec.temperature,
            "max_tokens": self.spec.max_tokens,
        }
        try:
            response = await self._client.post(self._url, json=body)
        except (httpx.HTTPError, httpx.InvalidURL, ValueError) as exc:
            raise PolicyError(
                f"the policy at {self.spec.base_url} is unreachable: {exc!r}"
            ) from exc
        if response.status_code != 200:
            raise PolicyError(
                f"the policy answered HTTP {response.status_code}: {response.text[:300]}"
            )
        try:
            content = response.json()["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise PolicyError("the policy's answer has no choices[0].message.content") from exc
        if not isinstance(content, str):
            raise PolicyError("the policy's message content is not text")
        return content

    async def aclose(self) -> None:
        if self._owned:
            await self._client.aclose()
