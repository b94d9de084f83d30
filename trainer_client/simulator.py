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

import asyncio
import json
import os
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from trainer_client.client import AsyncPlauditClient
from trainer_client.config import RetryPolicy, Timeouts
from trainer_client.errors import PlauditError

TERMINATIONS = ("user_done", "max_turns", "length")
DEFAULT_MAX_TURNS = 4
#: The simulated user's goal when a sample names none: keep asking about the first request.
DEFAULT_GOAL = (
    "You asked an assistant the following and want a complete, correct answer; ask follow-up "
    "questions until you have it: {first}"
)

#: The policy: (ids so far, most new tokens or None) -> (new ids, their log-probabilities).
Generate = Callable[[list[int], int | None], Awaitable[tuple[list[int], list[float] | None]]]


class SimulatorError(RuntimeError):
    """The simulator could not answer, after the client's retries (the dialogue cannot go on;
    never a silent reward). The client's error is its ``__cause__``."""


@dataclass(frozen=True)
class UserTurn:
    text: str
    done: bool
    satisfaction: float | None  # expected 1-5 rating of the assistant turn just before
    distribution: list[float] | None


class SimulatorClient:
    """``POST /v1/simulator/turn`` on the reward client (:class:`AsyncPlauditClient`), so a
    refused connection, a 503 or a restart is retried with the same :class:`RetryPolicy` and
    outage budget as reward requests (issue 22: the hooks gave up after one refused connection).
    """

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8000",
        *,
        api_key: str | None = None,
        calibration: str | None = None,
        temperature: float = 0.8,
        max_new_tokens: int | None = None,
        timeout_s: float = 120.0,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.calibration = calibration
        self.temperature = temperature
        self.max_new_tokens = max_new_tokens
        self._client = AsyncPlauditClient(
            base_url,
            api_key=api_key,
            timeout=Timeouts(read=timeout_s),
            retry=retry,
            sleep=sleep,
            transport=transport,
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
            data = await self._client.request("POST", "/v1/simulator/turn", json=body)
        except PlauditError as exc:
            raise SimulatorError(f"the simulator could not answer: {exc}") from exc
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

    def __init__(self, tokenizer: Any, template_kwargs: dict[str, Any] | None = None) -> None:
        self.tokenizer = tokenizer
        self.template_kwargs = dict(template_kwargs or {})  # e.g. Qwen3's enable_thinking
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
            messages, tokenize=False, add_generation_prompt=generation, **self.template_kwargs
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
    max_prompt_tokens: int | None = None,
    seed: int | None = None,
) -> Rollout:
    """Alternate the policy (``generate``: ids so far and the most new tokens it may add ->
    new ids, log-probabilities) and the simulated user until the user ends, ``max_turns``
    policy turns, or ``max_tokens`` completion tokens (policy and user tokens together: the
    trajectory never exceeds it, issue 22). The user rates every policy turn, a cut one too.
    A prompt over ``max_prompt_tokens`` keeps its last ones, as verl's own agent loops do."""
    if max_turns < 1:
        raise ValueError("max_turns must be at least 1")
    dialogue = [dict(m) for m in prompt if m["role"] in ("user", "assistant")]
    prompt_ids = tokens.prompt(prompt)
    if max_prompt_tokens is not None and len(prompt_ids) > max_prompt_tokens:
        prompt_ids = prompt_ids[-max_prompt_tokens:]
    rollout = Rollout(prompt_ids=prompt_ids, messages=list(dialogue))
    user_goal = goal_of(prompt, goal)
    for turn in range(max_turns):
        budget = None if max_tokens is None else max_tokens - len(rollout.completion_ids)
        ids, logprobs = await generate(rollout.prompt_ids + rollout.completion_ids, budget)
        if budget is not None:  # a generator that ignores the budget is cut to it
            ids, logprobs = ids[:budget], None if logprobs is None else logprobs[:budget]
        rollout.add(ids, 1, logprobs)
        rollout.policy_turns += 1
        rollout.messages.append({"role": "assistant", "content": tokens.decode(ids)})
        said = await simulator.turn(
            user_goal, rollout.messages, seed=None if seed is None else seed + turn
        )
        rollout.satisfaction.append(said.satisfaction)
        ending = _ending(said.done, turn + 1 >= max_turns)
        if ending:
            rollout.termination = ending
            break
        user_ids = tokens.user_turn(said.text, ids)
        if max_tokens is not None and len(rollout.completion_ids) + len(user_ids) >= max_tokens:
            rollout.termination = "length"  # no room for the user's turn and an answer
            break
        rollout.add(user_ids, 0)
        rollout.messages.append({"role": "user", "content": said.text})
    return rollout


def _ending(user_done: bool, last_turn: bool) -> str:
    """Why the dialogue ends after a rated policy turn ("" while it goes on)."""
    if user_done:
        return "user_done"
    return "max_turns" if last_turn else ""


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
    max_turn_tokens: int | None = None,
    goal_key: str = "goal",
    generate: Callable[[Any, list[int], int], tuple[list[int], list[float]]] | None = None,
) -> Callable[[list[Any], Any], dict[str, list[Any]]]:
    """A TRL ``GRPOTrainer`` ``rollout_func(prompts, trainer)`` (TRL >= 1.16): one dialogue
    with the simulated user per entry of ``prompts``. TRL's sampler has already repeated each
    prompt ``num_generations`` times, and TRL expects exactly one rollout per entry (issue 22).

    Each trajectory (policy and user tokens) holds at most ``trainer.args.max_completion_length``
    tokens, and a policy turn at most ``max_turn_tokens`` (default: what is left of that budget).
    It returns ``prompt_ids``, ``completion_ids``, ``logprobs``, ``env_mask`` (TRL leaves the
    user's tokens, 0, out of the loss) and, for the reward functions, ``final_satisfaction``,
    ``satisfaction``, ``termination`` and ``policy_turns``.

    A prompt is a list of chat messages (conversational datasets) or a string; a JSON string
    ``{"goal": ..., "prompt": [...]}`` carries the user's goal. ``generate(trainer, ids,
    max_new_tokens)`` samples the policy's answer (default: ``trainer.model`` with
    transformers' generate at ``trainer.args.temperature``; pass one backed by vLLM for speed).

    ::

        trainer = GRPOTrainer(model, reward_funcs=[satisfaction_reward], args=args,
                              train_dataset=dataset, rollout_func=trl_rollout_func())
    """
    turns = max_turns or int(os.environ.get("PLAUDIT_SIMULATOR_MAX_TURNS", DEFAULT_MAX_TURNS))
    sample = generate or _hf_generate

    def rollout_func(prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
        tokens = ChatTokens(trainer.processing_class)
        limit = getattr(getattr(trainer, "args", None), "max_completion_length", None)
        step = int(getattr(getattr(trainer, "state", None), "global_step", 0) or 0)

        async def policy(ids: list[int], budget: int | None) -> tuple[list[int], list[float]]:
            cap = [n for n in (budget, max_turn_tokens, limit) if n is not None]
            return sample(trainer, ids, min(cap) if cap else 64)

        async def run_all() -> list[Rollout]:
            client = simulator or SimulatorClient.from_env()
            try:
                out = []
                for index, raw in enumerate(prompts):
                    messages, goal = _prompt_and_goal(raw, goal_key)
                    dialogue = simulate_dialogue(
                        policy,
                        tokens,
                        client,
                        messages,
                        goal=goal,
                        max_turns=turns,
                        max_tokens=limit,
                        seed=1000 * (step * len(prompts) + index),
                    )
                    out.append(await dialogue)
                return out
            finally:
                if simulator is None:
                    await client.aclose()

        return _trl_fields(asyncio.run(run_all()))

    return rollout_func


def _trl_fields(rollouts: list[Rollout]) -> dict[str, list[Any]]:
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


def _hf_generate(
    trainer: Any, ids: list[int], max_new_tokens: int | None = None
) -> tuple[list[int], list[float]]:
    """The policy's answer from ``trainer.model`` (transformers' generate), at most
    ``max_new_tokens`` (default ``trainer.args.max_completion_length``), with the
    log-probability of each sampled token."""
    import torch

    model = trainer.model
    accelerator = getattr(trainer, "accelerator", None)
    if accelerator is not None:  # GRPOTrainer's model may be wrapped (DDP)
        model = accelerator.unwrap_model(model)
    args = trainer.args
    device = next(model.parameters()).device
    with torch.no_grad():
        out = model.generate(
            torch.tensor([ids], device=device),
            attention_mask=torch.ones(1, len(ids), dtype=torch.long, device=device),
            max_new_tokens=max_new_tokens or int(getattr(args, "max_completion_length", 64) or 64),
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
