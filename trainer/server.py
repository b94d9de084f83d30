"""The Plaudit server side of a run: check it before training, and its reward function.

::

    check_server(config)            # raises ServerCheckError with what to do about it
    reward = server_reward(config)  # TRL reward function, one request per group
"""

from __future__ import annotations

from trainer.config import TrainConfig
from trainer_client import PlauditClient, PlauditConnectionError, PlauditError, Timeouts
from trainer_client.rewards import PlauditReward


class ServerCheckError(RuntimeError):
    """The server is unreachable, not ready, or refuses the reward spec."""


def check_server(config: TrainConfig) -> None:
    """Raise :class:`ServerCheckError` unless ``config.server_url`` is ready and accepts
    ``config.spec`` (``POST /v1/rewards/validate``)."""
    url = config.server_url
    try:
        with PlauditClient(url, api_key=config.api_key, timeout=Timeouts(read=30)) as client:
            client.ready()
            answer = client.rewards_validate(config.spec)
    except PlauditConnectionError as exc:
        raise ServerCheckError(
            f"no Plaudit server at {url} ({exc}); start one with `plaudit serve` (or `make serve`)"
        ) from exc
    except PlauditError as exc:
        raise ServerCheckError(f"the Plaudit server at {url} is not usable: {exc}") from exc
    if not answer.get("valid"):
        problems = "; ".join(f"{e['param']}: {e['message']}" for e in answer.get("errors", []))
        raise ServerCheckError(f"the server refuses the reward spec: {problems}")


def server_reward(config: TrainConfig) -> PlauditReward:
    """The TRL reward function that asks ``config.server_url`` for each group's rewards,
    tagged with the run id (the server stores every scored group for the run).

    A request that still fails after the client's retries stops training (TRL would
    otherwise learn from nothing); a completion the server could not score is ``None``,
    which TRL leaves out of its group's baseline."""
    from trainer_client.rewards import plaudit_reward_func

    func = plaudit_reward_func(
        config.server_url,
        config.spec,
        api_key=config.api_key,
        run_id=config.run_id,
        name="plaudit",
        timeout=Timeouts(read=config.reward_timeout_s),
        num_generations=config.num_generations,
    )
    assert isinstance(func, PlauditReward)  # the blocking variant (asynchronous=False)
    return func
