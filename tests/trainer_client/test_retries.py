"""Retries, timeouts and error parsing against scripted stand-in servers on loopback."""

from __future__ import annotations

import doctest
import pickle
import socket
import uuid
from collections.abc import Callable

import httpx
import pytest

import judges.limits
import plaudit_wire.retry
import trainer_client.config
import trainer_client.errors
from tests.trainer_client.standin import Reply, StandIn, envelope
from trainer_client import (
    AsyncPlauditClient,
    BackendUnavailable,
    InvalidRequest,
    NotFound,
    Overloaded,
    PlauditClient,
    PlauditConnectionError,
    PlauditError,
    PlauditTimeout,
    RetryPolicy,
    ServerError,
    Timeouts,
)
from trainer_client.errors import from_response, parse_retry_after

Start = Callable[..., StandIn]
FAST = Timeouts(connect=2.0, read=5.0, write=2.0, pool=2.0)
OK = Reply(
    200, {"kind": "advantages", "estimator": "odrpo", "groups": []}, {"X-Request-ID": "req_ok"}
)
# Answers as the server's wire models have them (the client checks every answer against them).
STAMP = {"backend": "b", "model": "m", "template": "t", "mode": "logprob", "sampling": {}}
GRADED = Reply(200, {"kind": "rewards", "k": 10, "results": [], "judge": STAMP})
LADDER = Reply(200, {"k": 2, "thresholds": [2], "levels": [1, 2], "indicators": [[0], [1]]})


def overloaded(retry_after: str) -> Reply:
    reply = envelope(429, "overloaded", "too many requests in flight")
    return Reply(reply.status, reply.body, {**reply.headers, "Retry-After": retry_after})


def unavailable(message: str = "judge backend down") -> Reply:
    return envelope(503, "backend_unavailable", message)


def client_for(server: StandIn, sleeps: list[float], **kwargs: object) -> PlauditClient:
    kwargs.setdefault("timeout", FAST)
    return PlauditClient(server.url, sleep=sleeps.append, **kwargs)  # type: ignore[arg-type]


def keys_of(server: StandIn) -> list[str | None]:
    return [seen.headers.get("idempotency-key") for seen in server.requests]


def test_429_waits_at_least_retry_after_and_reuses_the_key(standin: Start) -> None:
    server = standin([overloaded("3"), OK])
    sleeps: list[float] = []
    with client_for(server, sleeps) as client:
        out = client.ordinal_advantages([[1, 2]], k=2)
        assert client.last_request_id == "req_ok"
    assert out["kind"] == "advantages"
    assert len(sleeps) == 1
    assert sleeps[0] >= 3.0
    keys = keys_of(server)
    assert len(keys) == 2
    assert keys[0] is not None
    assert keys[0] == keys[1]
    uuid.UUID(keys[0])  # a uuid4 made by the client
    assert server.requests[0].json() == server.requests[1].json()


def test_503_twice_then_ok(standin: Start) -> None:
    server = standin([unavailable(), unavailable(), OK])
    sleeps: list[float] = []
    policy = RetryPolicy(backoff=0.25, max_backoff=10.0)
    with client_for(server, sleeps, retry=policy) as client:
        client.ordinal_advantages([[1, 2]], k=2)
    assert len(server.requests) == 3
    assert len(set(keys_of(server))) == 1
    assert len(sleeps) == 2
    for retry, slept in enumerate(sleeps):
        assert 0.0 <= slept <= 0.25 * 2**retry  # full jitter under the exponential cap


def test_callers_key_is_sent_on_every_attempt(standin: Start) -> None:
    server = standin([unavailable(), GRADED])
    with client_for(server, []) as client:
        client.judge_scale("p", ["a", "b"], idempotency_key="group-17")
    assert keys_of(server) == ["group-17", "group-17"]
    assert server.requests[0].json() == {"prompt": "p", "completions": ["a", "b"]}


def test_each_logical_call_gets_its_own_key(standin: Start) -> None:
    server = standin([], then=OK)
    with client_for(server, []) as client:
        client.ordinal_advantages([[1, 2]])
        client.ordinal_advantages([[1, 2]])
        client.run_groups("r")
    first, second, audit = keys_of(server)
    assert first != second
    assert audit is None  # a GET is safe to retry without one


def test_502_is_retried(standin: Start) -> None:
    server = standin([Reply(502, "<html>bad gateway</html>"), LADDER])
    sleeps: list[float] = []
    with client_for(server, sleeps) as client:
        client.ordinal_decompose([1, 2], k=2)
    assert len(server.requests) == 2
    assert len(sleeps) == 1


def test_500_is_a_server_error_and_not_retried(standin: Start) -> None:
    server = standin([envelope(500, "internal_error", "internal server error")], then=OK)
    sleeps: list[float] = []
    with client_for(server, sleeps) as client, pytest.raises(ServerError) as caught:
        client.ordinal_decompose([1, 2], k=2)
    assert len(server.requests) == 1
    assert sleeps == []
    assert caught.value.status_code == 500
    assert caught.value.error_type == "internal_error"
    assert caught.value.request_id == "req_standin_500"


def test_422_is_not_retried(standin: Start) -> None:
    server = standin([envelope(422, "invalid_request", "k: too small", param="k")], then=OK)
    sleeps: list[float] = []
    with client_for(server, sleeps) as client, pytest.raises(InvalidRequest) as caught:
        client.ordinal_advantages([[1, 2]], k=1)
    assert len(server.requests) == 1
    assert sleeps == []
    assert (caught.value.param, caught.value.request_id) == ("k", "req_standin_422")
    assert caught.value.message == "k: too small"


def test_non_envelope_error_body(standin: Start) -> None:
    server = standin([Reply(404, "no such thing", {"X-Request-ID": "req_text"})])
    with client_for(server, []) as client, pytest.raises(NotFound) as caught:
        client.request("GET", "/v1/missing")
    exc = caught.value
    assert (exc.message, exc.error_type, exc.param) == ("no such thing", None, None)
    assert exc.request_id == "req_text"  # from the header


def test_exhausted_retries_raise_the_last_error(standin: Start) -> None:
    script = [unavailable(f"down, attempt {n}") for n in range(1, 4)]
    server = standin(script, then=OK)
    sleeps: list[float] = []
    client = client_for(server, sleeps, retry=RetryPolicy(max_retries=2, outage_budget=0))
    with client, pytest.raises(BackendUnavailable) as caught:
        client.ordinal_advantages([[1, 2]], k=2)
    assert len(server.requests) == 3
    assert len(sleeps) == 2
    assert caught.value.message == "down, attempt 3"
    assert caught.value.status_code == 503


def test_hanging_server_times_out_after_retries(standin: Start) -> None:
    server = standin([], then=Reply(hang=True))
    sleeps: list[float] = []
    timeouts = Timeouts(connect=2.0, read=0.2, write=2.0, pool=2.0)
    policy = RetryPolicy(max_retries=2)
    client = client_for(server, sleeps, timeout=timeouts, retry=policy)
    with client, pytest.raises(PlauditTimeout) as caught:
        client.ordinal_advantages([[1, 2]], k=2)
    assert caught.value.phase == "read"
    assert isinstance(caught.value.__cause__, httpx.ReadTimeout)
    assert len(server.requests) == 3
    assert len(set(keys_of(server))) == 1
    assert len(sleeps) == 2


def test_unreachable_server_raises_connection_error() -> None:
    with socket.socket() as sock:  # a port that was free a moment ago: nothing listens there
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    sleeps: list[float] = []
    policy = RetryPolicy(max_retries=2, outage_budget=0)
    client = PlauditClient(f"http://127.0.0.1:{port}", retry=policy, sleep=sleeps.append)
    with client, pytest.raises(PlauditConnectionError):
        client.health()
    assert len(sleeps) == 2


def test_a_restart_is_ridden_out_within_the_outage_budget(standin: Start) -> None:
    """Down for ten 503s (a restart reloading models) with max_retries=2: still answered."""
    server = standin([unavailable("starting") for _ in range(10)], then=OK)
    sleeps: list[float] = []
    client = client_for(server, sleeps, retry=RetryPolicy(max_retries=2, outage_budget=300))
    with client:
        client.ordinal_advantages([[1, 2]], k=2)
    assert len(server.requests) == 11 and len(sleeps) == 10
    assert len(set(keys_of(server))) == 1, "one Idempotency-Key across the whole outage"


def test_an_outage_longer_than_the_budget_raises(caplog: pytest.LogCaptureFixture) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    sleeps: list[float] = []
    policy = RetryPolicy(max_retries=2, outage_budget=30, jitter=lambda low, high: high)
    client = PlauditClient(f"http://127.0.0.1:{port}", retry=policy, sleep=sleeps.append)
    with client, pytest.raises(PlauditConnectionError):
        client.health()
    assert len(sleeps) > 2 and sum(sleeps) == pytest.approx(30)
    waits = [r for r in caplog.records if "retry" in r.getMessage()]
    assert len(waits) == len(sleeps), "a log line per wait"


def test_an_outage_budget_never_retries_what_is_not_an_outage(standin: Start) -> None:
    server = standin([overloaded("1") for _ in range(5)], then=OK)
    sleeps: list[float] = []
    client = client_for(server, sleeps, retry=RetryPolicy(max_retries=2, outage_budget=300))
    with client, pytest.raises(Overloaded):
        client.ordinal_advantages([[1, 2]], k=2)
    assert len(server.requests) == 3


def test_retry_after_beyond_the_limit_is_raised_at_once(standin: Start) -> None:
    server = standin([overloaded("3600")], then=OK)
    sleeps: list[float] = []
    with client_for(server, sleeps) as client, pytest.raises(Overloaded) as caught:
        client.ordinal_advantages([[1, 2]], k=2)
    assert caught.value.retry_after == 3600.0
    assert sleeps == []
    assert len(server.requests) == 1


def test_ready_is_not_retried(standin: Start) -> None:
    server = standin([unavailable("not ready: database")], then=OK)
    with client_for(server, []) as client, pytest.raises(BackendUnavailable):
        client.ready()
    assert len(server.requests) == 1


def test_api_key_is_sent_as_bearer(standin: Start) -> None:
    server = standin([], then=OK)
    with client_for(server, [], api_key="trainer-secret", headers={"X-Team": "rl"}) as client:
        client.health()
    headers = server.requests[0].headers
    assert headers["authorization"] == "Bearer trainer-secret"
    assert headers["x-team"] == "rl"


async def test_async_429_then_ok_reuses_the_key(standin: Start) -> None:
    server = standin([overloaded("2"), GRADED])
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    async with AsyncPlauditClient(server.url, sleep=sleep, timeout=FAST) as client:
        out = await client.judge_scale("2 + 2?", ["4", {"id": "x", "text": "5"}], k=10)
    assert out["kind"] == "rewards"
    assert sleeps[0] >= 2.0
    assert len(set(keys_of(server))) == 1
    assert server.requests[1].json()["completions"] == ["4", {"id": "x", "text": "5"}]


async def test_async_hanging_server_times_out(standin: Start) -> None:
    server = standin([], then=Reply(hang=True))
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    timeouts = Timeouts(connect=2.0, read=0.2, write=2.0, pool=2.0)
    client = AsyncPlauditClient(
        server.url, sleep=sleep, timeout=timeouts, retry=RetryPolicy(max_retries=1)
    )
    async with client:
        with pytest.raises(PlauditTimeout):
            await client.ordinal_decompose([1], k=2)
    assert len(server.requests) == 2
    assert len(sleeps) == 1


def test_an_answer_that_does_not_match_the_wire_model_is_a_clear_error(standin: Start) -> None:
    # A server of another version: the advantages lack their estimator. The client reads the
    # answer through plaudit_wire's AdvantagesResponse and says so, rather than letting the
    # trainer meet a KeyError later; it does not retry (the same answer would come again).
    server = standin([Reply(200, {"kind": "advantages", "groups": []}, {"X-Request-ID": "r1"})])
    sleeps: list[float] = []
    with client_for(server, sleeps) as client, pytest.raises(PlauditError) as caught:
        client.ordinal_advantages([[1, 2]], k=2)
    assert "AdvantagesResponse" in caught.value.message and "estimator" in caught.value.message
    assert caught.value.request_id == "r1" and len(server.requests) == 1


def test_fields_a_newer_server_adds_are_let_through(standin: Start) -> None:
    body = {"kind": "advantages", "estimator": "odrpo", "groups": [], "added_later": 1}
    server = standin([Reply(200, body)])
    with client_for(server, []) as client:
        assert client.ordinal_advantages([[1, 2]], k=2) == body


def test_backoff_is_capped_by_max_backoff() -> None:
    policy = RetryPolicy(backoff=1.0, max_backoff=2.0, jitter=lambda low, high: high)
    assert [policy.delay(n) for n in range(5)] == [1.0, 2.0, 2.0, 2.0, 2.0]
    assert policy.delay(0, retry_after=5.0) == 5.0


def test_retry_after_header_forms() -> None:
    assert parse_retry_after("2") == 2.0
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:30 GMT", now=1445412480.0) == 30.0
    assert parse_retry_after("soon") is None
    assert parse_retry_after(None) is None
    response = httpx.Response(503, text="upstream down", headers={"Retry-After": "4"})
    error = from_response(response)
    assert isinstance(error, BackendUnavailable)
    assert (error.retry_after, error.message, error.error_type) == (4.0, "upstream down", None)


def test_the_client_and_the_judge_backend_share_one_policy_and_one_parser() -> None:
    # Issue 20: two retry policies (different jitter) and two Retry-After parsers were one too
    # many; the judge's OpenAI-compatible backend waits with the same Backoff.
    from judges.backends.openai_backend import OpenAIConfig

    assert issubclass(RetryPolicy, plaudit_wire.retry.Backoff)
    assert isinstance(OpenAIConfig("http://x/v1", "m").retry, plaudit_wire.retry.Backoff)
    assert parse_retry_after is plaudit_wire.retry.parse_retry_after
    assert not hasattr(judges.limits, "parse_retry_after")


@pytest.mark.parametrize(
    "module", [trainer_client.errors, trainer_client.config, plaudit_wire.retry]
)
def test_docstring_examples(module: object) -> None:
    assert doctest.testmod(module).failed == 0  # type: ignore[arg-type]


def test_errors_survive_pickling() -> None:
    """Trainers ship errors across processes (multiprocessing, Ray): fields must survive."""
    response = httpx.Response(
        422,
        json={"error": {"type": "invalid_request", "message": "bad k", "param": "k"}},
        headers={"X-Request-ID": "req_9"},
    )
    error = pickle.loads(pickle.dumps(from_response(response)))
    assert isinstance(error, InvalidRequest)
    assert (error.status_code, error.param, error.request_id) == (422, "k", "req_9")
    timeout = pickle.loads(pickle.dumps(PlauditTimeout("slow", phase="read")))
    assert timeout.phase == "read"
