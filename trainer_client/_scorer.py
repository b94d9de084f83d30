"""The I/O half of the trainer adapters: one ``POST /v1/rewards/group`` per group.

:class:`GroupScorer` holds where the server is and the reward spec, and creates its HTTP client
lazily: once per process for the blocking client (a forked or unpickled copy makes its own) and
once per event loop for the async one. Pickling it keeps the configuration and drops the
clients, so a reward function built on it can cross process boundaries::

    scorer = GroupScorer(ClientConfig("http://127.0.0.1:8000"), {"channels": {"judge_scale": {}}})
    [answer] = scorer.score(group_by_prompt(["2+2?", "2+2?"], ["4", "5"]), run_id="r1", step=0)
    answer.totals   # [4.1, 2.3]
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from plaudit_wire.rewards import RewardsGroupRequest
from trainer_client._api import body
from trainer_client._groups import Group, Scored, read_group
from trainer_client.client import AsyncPlauditClient, PlauditClient, TimeoutLike
from trainer_client.config import RetryPolicy, Timeouts
from trainer_client.errors import (
    InvalidRequest,
    Overloaded,
    PlauditConnectionError,
    PlauditError,
    PlauditTimeout,
    ServerError,
)

#: Judge channels on a big model take a while: give the answer five minutes by default.
DEFAULT_TIMEOUT = Timeouts(read=300.0)
#: Failures that may heal on their own (after the client's retries gave up). Anything else (a
#: 4xx: bad spec, bad key, bad body) is a bug in the setup and always raises.
TRANSIENT_ERRORS = (PlauditTimeout, PlauditConnectionError, ServerError, Overloaded)

ENV_URL = "PLAUDIT_URL"
ENV_API_KEY = "PLAUDIT_API_KEY"
ENV_SPEC = "PLAUDIT_REWARD_SPEC"
ENV_RUN_ID = "PLAUDIT_RUN_ID"
ENV_TIMEOUT = "PLAUDIT_TIMEOUT"


class RewardUnavailable(PlauditError):
    """Plaudit answered, but a completion has no reward: ``status`` says why (a channel's
    status such as ``invalid`` or ``timeout``), ``index`` is its position in the batch.

    The verl and OpenRLHF adapters raise it, since those trainers have no value for "could not
    score" (a 0 would be a silent, wrong reward); the TRL adapter returns None instead.
    """

    def __init__(self, message: str, *, status: str | None = None, index: int | None = None):
        super().__init__(message)
        self.status = status
        self.index = index

    def _details(self) -> list[tuple[str, object]]:
        return [("status", self.status), ("index", self.index)]


@dataclass(frozen=True)
class ClientConfig:
    """Where the Plaudit server is and how to talk to it; ``concurrency`` bounds the groups in
    flight at once."""

    base_url: str
    api_key: str | None = None
    timeout: TimeoutLike = DEFAULT_TIMEOUT
    retry: RetryPolicy | None = None
    concurrency: int = 8

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ValueError("concurrency must be >= 1")


def rewards_spec(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A checked deep copy of a spec for a trainer: it has channels, and asks for rewards.

    Trainers compute group advantages themselves, so a spec asking Plaudit for advantages
    would normalize twice; it is refused here, before any request.

    >>> rewards_spec({"channels": {"judge_scale": {"k": 5}}})["channels"]
    {'judge_scale': {'k': 5}}
    """
    if not isinstance(spec, Mapping):
        raise TypeError(f"a reward spec is a mapping, not {type(spec).__name__}")
    channels = spec.get("channels")
    if not isinstance(channels, Mapping) or not channels:
        raise ValueError('a reward spec needs a non-empty "channels" object')
    advantage = spec.get("advantage", "none")
    if advantage != "none":
        raise ValueError(
            f'spec "advantage" is {advantage!r}: the trainer computes group advantages itself, '
            'so ask Plaudit for rewards ("advantage": "none")'
        )
    copied: dict[str, Any] = json.loads(json.dumps(spec))
    return copied


def load_spec(value: str, *, source: str = ENV_SPEC) -> dict[str, Any]:
    """A spec from JSON text, or from the path of a JSON file."""
    text = value.strip()
    if not text.startswith("{"):
        try:
            text = Path(text).expanduser().read_text(encoding="utf-8")
        except OSError as exc:
            raise ValueError(f"{source}: neither JSON nor a readable file: {exc}") from None
    try:
        spec = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{source} is not valid JSON: {exc}") from None
    return rewards_spec(spec)


class GroupScorer:
    """Scores groups against one spec, one request per group, ``concurrency`` at a time.

    ``score``/``ascore`` return one :class:`Scored` per group, in order. A failed request
    raises; with ``return_exceptions=True`` a transient one (see :data:`TRANSIENT_ERRORS`) is
    returned in its group's place instead.
    """

    def __init__(self, config: ClientConfig, spec: Mapping[str, Any]) -> None:
        self.config = config
        self.spec = rewards_spec(spec)
        self._lock = threading.Lock()
        self._sync: tuple[int, PlauditClient] | None = None
        self._async: tuple[asyncio.AbstractEventLoop, AsyncPlauditClient] | None = None
        self._verdict: dict[str, Any] | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"config": self.config, "spec": self.spec}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["config"], state["spec"])  # type: ignore[misc]

    def score(
        self,
        groups: Sequence[Group],
        *,
        run_id: str | None = None,
        step: int | None = None,
        return_exceptions: bool = False,
    ) -> list[Scored | PlauditError]:
        """Score ``groups`` with the blocking client, in threads when there are several."""
        client = self.client()

        def one(group: Group) -> Scored | PlauditError:
            try:
                answer = client.send_rewards_group(self._request(group, run_id, step))
            except TRANSIENT_ERRORS as exc:
                if return_exceptions:
                    return exc
                raise
            return read_group(answer, len(group))

        if len(groups) < 2 or self.config.concurrency == 1:
            return [one(group) for group in groups]
        with ThreadPoolExecutor(min(self.config.concurrency, len(groups))) as pool:
            return list(pool.map(one, groups))

    async def ascore(
        self,
        groups: Sequence[Group],
        *,
        run_id: str | None = None,
        step: int | None = None,
        return_exceptions: bool = False,
    ) -> list[Scored | PlauditError]:
        """Score ``groups`` concurrently with the async client of the running loop."""
        client = self.async_client()
        slots = asyncio.Semaphore(self.config.concurrency)

        async def one(group: Group) -> Scored:
            async with slots:
                answer = await client.send_rewards_group(self._request(group, run_id, step))
            return read_group(answer, len(group))

        outcomes = await asyncio.gather(*(one(g) for g in groups), return_exceptions=True)
        for outcome in outcomes:
            if isinstance(outcome, BaseException) and not (
                return_exceptions and isinstance(outcome, TRANSIENT_ERRORS)
            ):
                raise outcome
        return [o for o in outcomes if isinstance(o, Scored | PlauditError)]

    def validate(self) -> dict[str, Any]:
        """The server's verdict on the spec: ``valid``, the resolved spec and hash, or errors."""
        return self.client().rewards_validate(self.spec)

    def accepted(self) -> dict[str, Any]:
        """The server's verdict on a valid spec (asked once, then remembered): the resolved
        spec, ``group_channels`` and ``channel_ranges``; raises ``ValueError`` when the server
        rejects the spec."""
        if self._verdict is None:
            verdict = self.validate()
            if not verdict.get("valid"):
                problems = "; ".join(
                    f"{e.get('param')}: {e.get('message')}" for e in verdict.get("errors", [])
                )
                raise ValueError(f"the server rejected the reward spec: {problems}")
            self._verdict = verdict
        return self._verdict

    def group_channels(self) -> list[str]:
        """The spec's channels that compare a group's completions, as the server says."""
        return [str(name) for name in self.accepted().get("group_channels", [])]

    def client(self) -> PlauditClient:
        """This process's blocking client (created on first use)."""
        with self._lock:
            if self._sync is None or self._sync[0] != os.getpid():
                self._sync = (os.getpid(), PlauditClient(**self._client_options()))
            return self._sync[1]

    def async_client(self) -> AsyncPlauditClient:
        """The running event loop's async client (created on first use in that loop)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._async is None or self._async[0] is not loop:
                self._async = (loop, AsyncPlauditClient(**self._client_options()))
            return self._async[1]

    def close(self) -> None:
        """Close the blocking client, if one was made (the async one closes with its loop)."""
        with self._lock:
            sync, self._sync = self._sync, None
        if sync is not None:
            sync[1].close()

    def _client_options(self) -> dict[str, Any]:
        config = self.config
        return {
            "base_url": config.base_url,
            "api_key": config.api_key,
            "timeout": config.timeout,
            "retry": config.retry,
        }

    def _request(self, group: Group, run_id: str | None, step: int | None) -> RewardsGroupRequest:
        """The group as the wire model the server validates; a group it cannot hold (a text
        that is not text, a token count per completion missing) is an InvalidRequest here."""
        fields = {
            "prompt": group.prompt,
            "completions": list(group.texts),
            "spec": self.spec,
            "run_id": run_id,
            "step": step,
            "token_counts": None if group.token_counts is None else list(group.token_counts),
            "columns": group.columns,
        }
        try:
            return RewardsGroupRequest.model_validate(body(fields, {}))
        except ValidationError as exc:
            raise InvalidRequest(f"this group cannot be sent: {exc}") from None


def config_from_env(
    environ: Mapping[str, str] | None = None,
) -> tuple[ClientConfig, dict[str, Any]]:
    """The client configuration and spec from ``PLAUDIT_URL`` (default
    ``http://127.0.0.1:8000``), ``PLAUDIT_API_KEY``, ``PLAUDIT_TIMEOUT`` (seconds to wait for
    an answer) and ``PLAUDIT_REWARD_SPEC`` (JSON, or the path of a JSON file; required)."""
    env = os.environ if environ is None else environ
    raw_spec = env.get(ENV_SPEC)
    if not raw_spec:
        raise ValueError(
            f"set {ENV_SPEC} to a reward spec (JSON or a JSON file's path), e.g. "
            '\'{"channels": {"judge_scale": {"k": 10}}}\''
        )
    timeout: TimeoutLike = DEFAULT_TIMEOUT
    if env.get(ENV_TIMEOUT):
        try:
            timeout = Timeouts(read=float(env[ENV_TIMEOUT]))
        except ValueError:
            raise ValueError(f"{ENV_TIMEOUT} must be a number of seconds") from None
    config = ClientConfig(
        base_url=env.get(ENV_URL) or "http://127.0.0.1:8000",
        api_key=env.get(ENV_API_KEY) or None,
        timeout=timeout,
    )
    return config, load_spec(raw_spec)


class EnvScorer:
    """A :class:`GroupScorer` configured from the environment on first use, for the adapters
    that trainers load by file path (verl, OpenRLHF) and cannot pass arguments to.

    ``configure(scorer, run_id)`` sets one explicitly instead; ``reset()`` forgets it, so the
    next use reads the environment again.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._current: tuple[GroupScorer, str | None] | None = None

    def get(self) -> tuple[GroupScorer, str | None]:
        """The scorer and the run id (``PLAUDIT_RUN_ID``) to tag requests with."""
        with self._lock:
            if self._current is None:
                config, spec = config_from_env()
                self._current = (GroupScorer(config, spec), os.environ.get(ENV_RUN_ID) or None)
            return self._current

    def configure(self, scorer: GroupScorer, run_id: str | None = None) -> None:
        with self._lock:
            old, self._current = self._current, (scorer, run_id)
        if old is not None and old[0] is not scorer:
            old[0].close()

    def reset(self) -> None:
        with self._lock:
            old, self._current = self._current, None
        if old is not None:
            old[0].close()


_ENV_SCORERS: dict[str, EnvScorer] = {}


def env_scorer(adapter: str) -> EnvScorer:
    """The :class:`EnvScorer` of ``adapter`` in this process, created on first use.

    It lives here, in an importable module, and not in the adapter's own module globals: verl
    loads ``compute_score`` from a file path, so Ray's cloudpickle pickles it by value with the
    globals it reads, and an ``EnvScorer`` (a lock, an HTTP client) does not pickle (issue 22:
    ``cannot pickle '_thread.lock'`` under verl's ``remote`` reward manager). A function of
    this module is pickled by reference, so each Ray worker makes its own scorer.
    """
    found = _ENV_SCORERS.get(adapter)
    if found is None:
        found = _ENV_SCORERS.setdefault(adapter, EnvScorer())  # setdefault: one wins a race
    return found
