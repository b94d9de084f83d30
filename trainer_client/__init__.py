"""Plaudit's light trainer client: httpx and pydantic only, never torch or FastAPI.

Sync and async clients for every Plaudit endpoint, with per-phase timeouts, typed errors that
keep the server's error type and request id, and retries (backoff with full jitter, honouring
Retry-After) that reuse one Idempotency-Key per call, so a retried group is scored once::

    from trainer_client import PlauditClient, InvalidRequest, Timeouts

    with PlauditClient("http://127.0.0.1:8000", api_key="trainer-secret",
                       timeout=Timeouts(read=120)) as client:
        out = client.ordinal_advantages([[1, 3, 5, 5], [2, 4, 4]], k=5, run_id="run-7", step=0)
        advantages = [g["advantages"] for g in out["groups"]]
        try:
            client.ordinal_advantages([[1, 9]], k=5)
        except InvalidRequest as exc:
            print(exc.param, exc.request_id)   # groups[0].scores[1] req_...

``AsyncPlauditClient`` has the same methods, awaited (``async with ... as client``).

Trainer adapters: :func:`plaudit_reward_func` builds a TRL ``GRPOTrainer`` reward function
(``trainer_client.rewards``); ``trainer_client.verl`` and ``trainer_client.openrlhf`` are files
that verl (``custom_reward_function.path``) and OpenRLHF (``--remote_rm_url``) load by path.
"""

from trainer_client._scorer import RewardUnavailable
from trainer_client.client import DEFAULT_BASE_URL, AsyncPlauditClient, PlauditClient
from trainer_client.config import RetryPolicy, Timeouts
from trainer_client.errors import (
    AuthenticationError,
    BackendUnavailable,
    Conflict,
    InvalidRequest,
    NotFound,
    Overloaded,
    PermissionDenied,
    PlauditConnectionError,
    PlauditError,
    PlauditTimeout,
    ServerError,
)
from trainer_client.rewards import AsyncPlauditReward, PlauditReward, plaudit_reward_func

__all__ = [
    "DEFAULT_BASE_URL",
    "AsyncPlauditClient",
    "AsyncPlauditReward",
    "AuthenticationError",
    "BackendUnavailable",
    "Conflict",
    "InvalidRequest",
    "NotFound",
    "Overloaded",
    "PermissionDenied",
    "PlauditClient",
    "PlauditConnectionError",
    "PlauditError",
    "PlauditReward",
    "PlauditTimeout",
    "RetryPolicy",
    "RewardUnavailable",
    "ServerError",
    "Timeouts",
    "plaudit_reward_func",
]
