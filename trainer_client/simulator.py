"""Interactive RL against Plaudit's user simulator: the policy and a simulated user take turns.

The core (:func:`simulate_dialogue`) is trainer-neutral: given a way to generate the policy's
tokens, a tokenizer and a :class:`SimulatorClient`, it alternates the policy's answer and the
simulated user's reply (``POST /v1/simulator/turn``) for up to ``max_turns`` policy turns and
returns one token trajectory: the prompt's ids, then the policy's tokens (mask 1, with their
log-probabilities) and the user's tokens (mask 0: the policy is never trained on what the user
said), the user's satisfaction after every policy turn (1-5, from the calibrated predictor or
the prompted estimate) and why it ended (``user_done``, ``max_turns``, ``length``).

Three trainer adapters use it (httpx only here; torch and the trainers are imported by them):
``trainer_client.verl_agent`` (a verl agent loop), :func:`trl_rollout_func` (TRL's
``rollout_func``) and ``trainer_client.openrlhf_agent`` (an OpenRLHF agent). They read the
server from the environment like the other adapters::

    PLAUDIT_URL=http://127.0.0.1:8000   PLAUDIT_API_KEY=...   # reward scope
    PLAUDIT_SIMULATOR_CALIBRATION=uss@1                       # optional: calibrated simulator
    PLAUDIT_SIMULATOR_MAX_TURNS=4                             # policy turns per dialogue
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

TERMINATIONS = ("user_done", "max_turns", "length")
DEFAULT_MAX_TURNS = 4
#: The simulated user's goal when a sample names none: keep asking about the first request.
DEFAULT_GOAL = (
    "You asked an assistant the following and want a complete, correct answer; ask follow-up "
    "questions until you have it: {first}"
)

Generate = Callable[[list[int]], Awaitable[tuple[list[int], list[float] | None]]]


class SimulatorError(RuntimeError):
    """The simulator could not answer (the dialogue cannot go on; never a silent reward)."""


@dataclass(frozen=True)
class UserTurn:
    text: str
    done: bool
    satisfaction: float | None  # expected 1-5 rating of the assistant turn just before
    distribution: list[float] | None


class SimulatorClient:
    """``POST /v1/simulator/turn`` over httpx (async)."""

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8000",
        *,
        api_key: str | None = None,
        calibration: str | None = None,
        temperature: float = 0.8,
        max_new_tokens: int | None = None,
        timeout_s: float = 120.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.calibration = calibration
        self.temperature = temperature
        self.max_new_tokens = max_new_tokens
        self._client = httpx.AsyncClient(
            base_url=base_url, headers=headers, timeout=timeout_s, transport=transport
        )

    @classmethod
    def from_env(cls, **overrides: Any) -> SimulatorClient:
        options: dict[str, Any] = {
            "base_url": os.environ.get("PLAUDIT_URL", "http://127.0.0.1:8000"),
            "api_key": os.environ.get("PLAUDIT_API_KEY") or None,
            "calibration": os.environ.get("PLAUDIT_SIMULATOR_CALIBRATION") or None,
            "temperature": float(os.environ.get("PLAUDIT_SIMULATOR_TEMPERATURE", "0.8")),
        }
        return cls(**{**options, **overrides})

    async def turn(
        self, goal: str, messages: Sequence[dict[str, str]], *, seed: int | None = None
    ) -> UserTurn:
        body: dict[str, Any] = {
            "goal": goal,
            "messages": [{"role": m["role"], "content": m["content"]} for m in messages],
            "calibration": self.calibration,
            "temperature": self.temperature,
            "seed": seed,
        }
        if self.max_new_tokens is not None:
            body["max_new_tokens"] = self.max_new_tokens
        try:
            response = await self._client.post("/v1/simulator/turn", json=body)
        except httpx.HTTPError as exc:
            raise SimulatorError(f"the simulator is unreachable: {exc!r}") from exc
        if response.status_code != 200:
            raise SimulatorError(f"the simulator answered {response.status_code}: {response.text}")
        data = response.json()
        rated = data.get("satisfaction")
        return UserTurn(
            text=data["message"]["content"],
            done=bool(data["done"]),
            satisfaction=None if rated is None else float(rated["expected"]),
            distribution=None if rated is None else list(rated["distribution"]),
        )

    async def aclose(self) -> None:
        await self._client.aclose()


class ChatTokens:
    """Token ids of a chat as the policy's chat template writes it, built turn by turn: the
    prompt once, then each user turn as the template's text between the policy's end of turn
    and the next open assistant turn (the approach of verl's tool agent loop for tool
    responses), so the policy's own sampled ids are never re-tokenized."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        head = [{"role": "system", "content": "S"}]
        self._head = self._text(head)
        ended = self._text([*head, {"role": "assistant", "content": "\x01"}])
        self._after_answer = ended.split("\x01", 1)[1]  # e.g. "<|im_end|>\n"
        eos = tokenizer.eos_token or ""
        self._eos_id = tokenizer.eos_token_id
        self._after_eos = (
            self._after_answer[len(eos) :] if eos and self._after_answer.startswith(eos) else None
        )

    def _text(self, messages: list[dict[str, str]], generation: bool = False) -> str:
        text: str = self.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=generation
        )
        return text

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def prompt(self, messages: Sequence[dict[str, str]]) -> list[int]:
        return self.encode(self._text([dict(m) for m in messages], generation=True))

    def user_turn(self, text: str, after: Sequence[int]) -> list[int]:
        """The user's turn (and the open assistant turn after it), following the policy's
        tokens ``after``."""
        head = [{"role": "system", "content": "S"}]
        block = self._text([*head, {"role": "user", "content": text}], generation=True)
        block = block[len(self._head) :]
        ended = bool(after) and after[-1] == self._eos_id and self._after_eos is not None
        closing = self._after_eos if ended else self._after_answer
        return self.encode(f"{closing}{block}")

    def decode(self, ids: Sequence[int]) -> str:
        return str(self.tokenizer.decode(list(ids), skip_special_tokens=True)).strip()


@dataclass
class Rollout:
    """One dialogue as a token trajectory (what every trainer adapter returns a view of)."""

    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)  # 1: the policy's token, 0: the user's
    logprobs: list[float] = field(default_factory=list)  # 0.0 on the user's tokens
    messages: list[dict[str, str]] = field(default_factory=list)
    satisfaction: list[float | None] = field(default_factory=list)  # after each policy turn
    termination: str = "max_turns"
    policy_turns: int = 0

    @property
    def final_satisfaction(self) -> float | None:
        return self.satisfaction[-1] if self.satisfaction else None

    def add(self, ids: Sequence[int], mask: int, logprobs: Sequence[float] | None = None) -> None:
        self.completion_ids.extend(ids)
        self.mask.extend([mask] * len(ids))
        self.logprobs.extend(list(logprobs) if logprobs is not None else [0.0] * len(ids))


def goal_of(messages: Sequence[dict[str, str]], goal: str | None = None) -> str:
    if goal:
        return goal
    first = next((m["content"] for m in messages if m["role"] == "user"), "")
    return DEFAULT_GOAL.format(first=first[:2000])


async def simulate_dialogue(
    generate: Generate,
    tokens: ChatTokens,
    simulator: SimulatorClient,
    prompt: Sequence[dict[str, str]],
    *,
    goal: str | None = None,
    max_turns: int = DEFAULT_MAX_TURNS,
    max_tokens: int | None = None,
    seed: int | None = None,
) -> Rollout:
    """Alternate the policy (``generate``: ids so far -> new ids, log-probabilities) and the
    simulated user until the user ends, ``max_turns`` policy turns, or ``max_tokens``
    completion tokens."""
    if max_turns < 1:
        raise ValueError("max_turns must be at least 1")
    dialogue = [dict(m) for m in prompt if m["role"] in ("user", "assistant")]
    rollout = Rollout(prompt_ids=tokens.prompt(prompt), messages=list(dialogue))
    user_goal = goal_of(prompt, goal)
    for turn in range(max_turns):
        ids, logprobs = await generate(rollout.prompt_ids + rollout.completion_ids)
        rollout.add(ids, 1, logprobs)
        rollout.policy_turns += 1
        answer = {"role": "assistant", "content": tokens.decode(ids)}
        rollout.messages.append(answer)
        said = await simulator.turn(
            user_goal, rollout.messages, seed=None if seed is None else seed + turn
        )
        rollout.satisfaction.append(said.satisfaction)
        if said.done:
            rollout.termination = "user_done"
            break
        if turn == max_turns - 1:
            rollout.termination = "max_turns"
            break
        user_ids = tokens.user_turn(said.text, ids)
        if max_tokens is not None and len(rollout.completion_ids) + len(user_ids) >= max_tokens:
            rollout.termination = "length"
            break
        rollout.add(user_ids, 0)
        rollout.messages.append({"role": "user", "content": said.text})
    return rollout


def satisfaction_reward(completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
    """A TRL reward function: the simulated user's final satisfaction mapped onto 0..1
    (``(expected - 1) / 4``), from the ``final_satisfaction`` that :func:`trl_rollout_func`
    passes on; None (TRL skips it) where the user could not rate."""
    finals = kwargs.get("final_satisfaction") or [None] * len(completions)
    return [None if s is None else (float(s) - 1) / 4 for s in finals]


def trl_rollout_func(
    simulator: SimulatorClient | None = None,
    *,
    max_turns: int | None = None,
    goal_key: str = "goal",
    generate: Callable[[Any, list[int]], tuple[list[int], list[float]]] | None = None,
) -> Callable[[list[Any], Any], dict[str, list[Any]]]:
    """A TRL ``GRPOTrainer`` ``rollout_func(prompts, trainer)`` (TRL 1.16): for each prompt,
    ``trainer.num_generations`` dialogues with the simulated user. It returns ``prompt_ids``,
    ``completion_ids``, ``logprobs``, ``env_mask`` (TRL leaves the user's tokens, 0, out of
    the loss) and, for the reward functions, ``final_satisfaction``, ``satisfaction``,
    ``termination`` and ``policy_turns``.

    A prompt is a list of chat messages (conversational datasets) or a string; a JSON string
    ``{"goal": ..., "prompt": [...]}`` carries the user's goal. ``generate(trainer, ids)``
    samples the policy's answer (default: ``trainer.model`` with transformers' generate,
    ``trainer.args.max_completion_length`` and ``temperature``; pass one backed by vLLM for
    speed)."""
    import asyncio

    turns = max_turns or int(os.environ.get("PLAUDIT_SIMULATOR_MAX_TURNS", DEFAULT_MAX_TURNS))
    sample = generate or _hf_generate

    def rollout_func(prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
        tokens = ChatTokens(trainer.processing_class)
        count = int(getattr(trainer, "num_generations", 1) or 1)
        limit = getattr(getattr(trainer, "args", None), "max_completion_length", None)

        async def run_all() -> list[Rollout]:
            client = simulator or SimulatorClient.from_env()
            try:

                async def policy(ids: list[int]) -> tuple[list[int], list[float] | None]:
                    return sample(trainer, ids)

                out = []
                for index, raw in enumerate(prompts):
                    messages, goal = _prompt_and_goal(raw, goal_key)
                    for k in range(count):
                        out.append(
                            await simulate_dialogue(
                                policy,
                                tokens,
                                client,
                                messages,
                                goal=goal,
                                max_turns=turns,
                                max_tokens=limit,
                                seed=1000 * index + k,
                            )
                        )
                return out
            finally:
                if simulator is None:
                    await client.aclose()

        rollouts = asyncio.run(run_all())
        return {
            "prompt_ids": [r.prompt_ids for r in rollouts],
            "completion_ids": [r.completion_ids for r in rollouts],
            "logprobs": [r.logprobs for r in rollouts],
            "env_mask": [r.mask for r in rollouts],
            "final_satisfaction": [r.final_satisfaction for r in rollouts],
            "satisfaction": [r.satisfaction for r in rollouts],
            "termination": [r.termination for r in rollouts],
            "policy_turns": [r.policy_turns for r in rollouts],
        }

    return rollout_func


def _prompt_and_goal(raw: Any, goal_key: str) -> tuple[list[dict[str, str]], str | None]:
    if isinstance(raw, str):
        try:
            parsed = json.loads(raw)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict) and "prompt" in parsed:
            return _prompt_and_goal(parsed["prompt"], goal_key)[0], parsed.get(goal_key)
        return [{"role": "user", "content": raw}], None
    return [{"role": m["role"], "content": m["content"]} for m in raw], None


def _hf_generate(trainer: Any, ids: list[int]) -> tuple[list[int], list[float]]:
    """The policy's answer from ``trainer.model`` (transformers' generate) with the log-
    probability of each sampled token."""
    import torch

    model = trainer.model
    args = trainer.args
    device = next(model.parameters()).device
    with torch.no_grad():
        out = model.generate(
            torch.tensor([ids], device=device),
            attention_mask=torch.ones(1, len(ids), dtype=torch.long, device=device),
            max_new_tokens=int(getattr(args, "max_completion_length", 64) or 64),
            do_sample=True,
            temperature=float(getattr(args, "temperature", 1.0) or 1.0),
            top_p=1.0,
            top_k=0,
            output_scores=True,
            return_dict_in_generate=True,
            pad_token_id=trainer.processing_class.pad_token_id,
        )
    new = out.sequences[0, len(ids) :].tolist()
    logprobs = [
        float(torch.log_softmax(score[0].float(), dim=-1)[token])
        for score, token in zip(out.scores, new, strict=False)
    ]
    eos = trainer.processing_class.eos_token_id
    if eos in new:  # keep the end of turn, drop any padding after it
        cut = new.index(eos) + 1
        new, logprobs = new[:cut], logprobs[:cut]
    return new, logprobs


CHATML_USER = "\n<|im_start|>user\n{content}<|im_end|>\n<|im_start|>assistant\n"
_CHATML_TURN = re.compile(r"<\|im_start\|>(system|user|assistant)\n(.*?)<\|im_end\|>", re.S)


def chatml_messages(text: str) -> list[dict[str, str]]:
    """The messages of a ChatML-rendered prompt (a plain text: one user message)."""
    found = [{"role": r, "content": c.strip()} for r, c in _CHATML_TURN.findall(text)]
    return found or [{"role": "user", "content": text.strip()}]
