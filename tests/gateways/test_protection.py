"""Edge protections of the HTTP gateway: errors, auth, rate and concurrency limits, sizes, timeouts, config."""

from __future__ import annotations

import asyncio
import base64
import pickle
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from gateways.http.auth import ANONYMOUS, Authenticator, Principal, fingerprint
from gateways.http.limits import (
    ConcurrencyLimits,
    RateLimiter,
    Slots,
    check_body_size,
    request_timeout,
)
from gateways.http.protection import (
    AuthConfig,
    ConcurrencyConfig,
    CorsConfig,
    EdgeConfig,
    EdgeError,
    RateLimitConfig,
    TimeoutConfig,
    agent_not_found,
    auth_required,
    get_header,
    invalid_header,
    payload_too_large,
    rate_limited,
    resource_exhausted,
)
from mesh.a2a.exceptions import PushNotificationNotSupported, RpcError
from mesh.limits import MessageLimits
from tests.test_layering import imported_roots

EPOCH = 1_700_000_000.0


class FakeClock:
    """Monotonic and wall time that move only when a test says so."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def wall(self) -> float:
        return EPOCH + self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


# ---------------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("error", "code", "error_type", "status"),
    [
        (agent_not_found("Nope", ["b", "a"]), -32000, "AgentNotFound", 404),
        (rate_limited(100, 60, 3), -32003, "RateLimited", 429),
        (auth_required("send a token", challenge='Bearer realm="a2a"'), -32004, "AuthenticationRequired", 401),
        (resource_exhausted("full", resource="r", limit=1), -32051, "ResourceExhausted", 429),
        (resource_exhausted("full", resource="r", limit=1, status=503), -32051, "ResourceExhausted", 503),
        (payload_too_large(2_000_000, 1_000_000), -32600, "PayloadTooLarge", 413),
        (invalid_header("X-A2A-Timeout", "soon", "a number"), -32600, "InvalidHeader", 400),
    ],
)
def test_edge_errors_carry_code_error_type_and_status(
    error: EdgeError, code: int, error_type: str, status: int
) -> None:
    assert isinstance(error, RpcError)
    assert (error.code, error.error_type_name, error.http_status) == (code, error_type, status)
    wire = error.to_response("req-1").model_dump(mode="json", by_alias=True, exclude_none=True)
    assert wire["error"]["data"]["errorType"] == error_type
    assert wire["id"] == "req-1"


def test_edge_error_details() -> None:
    assert agent_not_found("Nope", ["b", "a"]).data == {
        "errorType": "AgentNotFound",
        "agentName": "Nope",
        "availableAgents": ["a", "b"],
    }
    assert "available agents: a, b" in str(agent_not_found("Nope", ["b", "a"]))
    assert "available agents: none" in str(agent_not_found("Nope", []))
    limited = rate_limited(100, 60, 3)
    assert limited.data == {"errorType": "RateLimited", "limit": 100, "window": 60, "retryAfter": 3}
    assert limited.headers["Retry-After"] == "3"
    assert auth_required("no", challenge="Basic").headers == {"WWW-Authenticate": "Basic"}


def test_edge_error_pickles_as_itself() -> None:
    error = rate_limited(10, 1, 2, headers={"X-RateLimit-Limit": "10"})
    again = pickle.loads(pickle.dumps(error))
    # RpcError.from_error would make -32003 a PushNotificationNotSupported.
    assert type(again) is EdgeError and not isinstance(again, PushNotificationNotSupported)
    assert (again.error, again.http_status, dict(again.headers)) == (error.error, 429, dict(error.headers))


def test_get_header_ignores_case() -> None:
    assert get_header({"x-api-key": "k"}, "X-API-Key") == "k"
    assert get_header({"X-API-KEY": "k"}, "x-api-key") == "k"
    assert get_header({}, "X-API-Key") is None


# ---------------------------------------------------------------------------------- auth

TOKEN = "tok-s3cret-value-1234"
KEY = "key-s3cret-value-5678"


def bearer_auth(**extra: Any) -> Authenticator:
    return Authenticator(AuthConfig(mode="bearer", tokens=[TOKEN, {"name": "ci", "secret": "ci-token"}], **extra))


def refused(authenticator: Authenticator, headers: dict[str, str]) -> EdgeError:
    with pytest.raises(EdgeError) as info:
        authenticator.authenticate(headers)
    assert (info.value.code, info.value.http_status) == (-32004, 401)
    assert info.value.error_type_name == "AuthenticationRequired"
    return info.value


def test_mode_none_is_anonymous() -> None:
    authenticator = Authenticator(AuthConfig())
    assert authenticator.authenticate({}) is ANONYMOUS
    assert authenticator.authenticate({"Authorization": "Bearer anything"}) == Principal("anonymous", "none")


def test_bearer_accepts_configured_tokens() -> None:
    authenticator = bearer_auth()
    assert authenticator.authenticate({"Authorization": f"Bearer {TOKEN}"}) == Principal(
        fingerprint(TOKEN, "token"), "bearer"
    )
    assert authenticator.authenticate({"Authorization": "Bearer ci-token"}) == Principal("ci", "bearer")


def test_bearer_header_name_and_scheme_ignore_case() -> None:
    authenticator = bearer_auth()
    assert authenticator.authenticate({"authorization": f"bearer {TOKEN}"}).scheme == "bearer"
    assert authenticator.authenticate({"AUTHORIZATION": f"  BEARER  {TOKEN} "}).scheme == "bearer"


@pytest.mark.parametrize(
    ("headers", "says"),
    [
        ({}, "Authorization: Bearer <token>"),
        ({"Authorization": "Bearer wrong-token"}, "not valid"),
        ({"Authorization": f"Bearer {TOKEN}x"}, "not valid"),
        ({"Authorization": "Bearer ünïcode"}, "not valid"),
        ({"Authorization": "Bearer "}, "no token"),
        ({"Authorization": f"Basic {TOKEN}"}, "scheme 'Basic'"),
        ({"X-API-Key": TOKEN}, "Authorization: Bearer"),
    ],
)
def test_bearer_refusals(headers: dict[str, str], says: str) -> None:
    error = refused(bearer_auth(), headers)
    assert says in error.error.message
    assert error.headers["WWW-Authenticate"].startswith('Bearer realm="a2a"')
    assert TOKEN not in error.error.message


def test_bearer_challenge_says_why_a_token_failed() -> None:
    error = refused(bearer_auth(realm="mesh"), {"Authorization": "Bearer nope"})
    assert error.headers["WWW-Authenticate"] == 'Bearer realm="mesh", error="invalid_token"'
    assert refused(bearer_auth(), {}).headers["WWW-Authenticate"] == 'Bearer realm="a2a"'


def test_api_key_accepted_in_any_case() -> None:
    authenticator = Authenticator(AuthConfig(mode="api_key", keys=[{"secret": KEY, "name": "app"}]))
    for name in ("X-API-Key", "x-api-key", "X-Api-Key"):
        assert authenticator.authenticate({name: KEY}) == Principal("app", "api_key")
    # Clients that only know bearer tokens send the key so.
    for value in (f"Bearer {KEY}", f"bearer  {KEY} "):
        assert authenticator.authenticate({"Authorization": value}) == Principal("app", "api_key")


@pytest.mark.parametrize(
    ("headers", "says"),
    [
        ({}, "X-API-Key header"),
        ({"Authorization": "Bearer wrong"}, "not valid"),
        ({"Authorization": f"Basic {KEY}"}, "X-API-Key header"),
        ({"X-API-Key": "wrong"}, "not valid"),
        ({"X-API-Key": "  "}, "X-API-Key header"),
    ],
)
def test_api_key_refusals(headers: dict[str, str], says: str) -> None:
    error = refused(Authenticator(AuthConfig(mode="api_key", keys=[KEY])), headers)
    assert says in error.error.message
    assert error.headers["WWW-Authenticate"] == 'ApiKey realm="a2a", header="X-API-Key"'


def basic_auth() -> Authenticator:
    return Authenticator(AuthConfig(mode="basic", users={"alice": "pa:ss word", "bob": "hunter2"}))


def test_basic_accepts_users() -> None:
    authenticator = basic_auth()
    assert authenticator.authenticate({"Authorization": basic("alice", "pa:ss word")}) == Principal("alice", "basic")
    encoded = basic("bob", "hunter2").removeprefix("Basic ")
    assert authenticator.authenticate({"AUTHORIZATION": f"basic {encoded}"}).name == "bob"


@pytest.mark.parametrize(
    ("value", "says"),
    [
        (None, "Authorization: Basic"),
        (basic("alice", "wrong"), "wrong user name or password"),
        (basic("mallory", "hunter2"), "wrong user name or password"),
        (basic("Bob", "hunter2"), "wrong user name or password"),
        ("Basic !!!not-base64!!!", "malformed"),
        ("Basic " + base64.b64encode(b"no-colon").decode(), "malformed"),
        ("Basic " + base64.b64encode(b":password-only").decode(), "malformed"),
        ("Basic " + base64.b64encode(b"\xff\xfe:x").decode(), "malformed"),
        ("Basic", "malformed"),
        (f"Bearer {TOKEN}", "scheme 'Bearer'"),
    ],
)
def test_basic_refusals(value: str | None, says: str) -> None:
    error = refused(basic_auth(), {} if value is None else {"Authorization": value})
    assert says in error.error.message
    assert error.headers["WWW-Authenticate"] == 'Basic realm="a2a", charset="UTF-8"'
    assert "hunter2" not in error.error.message


@pytest.mark.parametrize(
    ("config", "headers", "secret"),
    [
        (AuthConfig(mode="bearer", tokens=[TOKEN]), {"Authorization": f"Bearer {TOKEN}"}, TOKEN),
        (AuthConfig(mode="api_key", keys=[KEY]), {"X-API-Key": KEY}, KEY),
        (AuthConfig(mode="basic", users={"alice": "hunter2"}), {"Authorization": basic("alice", "hunter2")}, "hunter2"),
    ],
)
def test_principal_and_config_never_show_the_secret(config: AuthConfig, headers: dict[str, str], secret: str) -> None:
    principal = Authenticator(config).authenticate(headers)
    assert secret not in principal.name and secret not in repr(principal)
    assert secret not in repr(config) and secret not in config.model_dump_json()


def test_fingerprint_is_short_stable_and_distinct() -> None:
    assert fingerprint(TOKEN, "token") == fingerprint(TOKEN, "token")
    assert fingerprint(TOKEN, "token") != fingerprint(KEY, "token")
    assert len(fingerprint(TOKEN, "token")) == len("token-") + 12


# ---------------------------------------------------------------------------------- rate


def limiter(clock: FakeClock, **config: Any) -> RateLimiter:
    return RateLimiter(RateLimitConfig(**config), clock=clock, wall_clock=clock.wall)


def test_rate_limiter_allows_the_burst_then_refuses() -> None:
    clock = FakeClock()
    rates = limiter(clock, requests=5, window_s=10)  # one token every 2 s
    decisions = [rates.check("c") for _ in range(6)]
    assert [d.allowed for d in decisions] == [True] * 5 + [False]
    assert [d.remaining for d in decisions] == [4, 3, 2, 1, 0, 0]
    refusal = decisions[-1]
    assert (refusal.limit, refusal.window, refusal.retry_after) == (5, 10, 2)
    assert refusal.reset == EPOCH + 10  # the bucket is full again after 5 tokens x 2 s


def test_rate_limiter_refills_over_time() -> None:
    clock = FakeClock()
    rates = limiter(clock, requests=5, window_s=10)
    for _ in range(5):
        rates.check("c")
    clock.advance(1.0)
    assert rates.check("c").retry_after == 1  # half a token: one more second
    clock.advance(1.0)
    allowed = rates.check("c")
    assert allowed.allowed and allowed.remaining == 0
    clock.advance(10.0)
    assert rates.check("c").remaining == 4  # capped at capacity, not 5 + 1


def test_rate_limiter_burst_is_the_capacity() -> None:
    clock = FakeClock()
    rates = limiter(clock, requests=60, window_s=60, burst=3)
    assert [rates.check("c").allowed for _ in range(4)] == [True, True, True, False]
    clock.advance(1.0)
    assert rates.check("c").allowed


def test_rate_limit_reset_tracks_the_refill() -> None:
    clock = FakeClock()
    rates = limiter(clock, requests=10, window_s=10)
    assert rates.check("c").reset == EPOCH + 1
    clock.advance(0.5)
    assert rates.check("c").reset == EPOCH + 2  # 1.5 s worth of tokens missing at t=0.5, rounded up


def test_rate_limiter_clients_are_independent() -> None:
    rates = limiter(FakeClock(), requests=1, window_s=60)
    assert rates.check("a").allowed and rates.check("b").allowed
    assert not rates.check("a").allowed


def test_rate_headers_on_allowed_and_refused() -> None:
    rates = limiter(FakeClock(), requests=1, window_s=60)
    allowed = rates.check("c")
    assert allowed.headers() == {
        "X-RateLimit-Limit": "1",
        "X-RateLimit-Remaining": "0",
        "X-RateLimit-Reset": str(int(EPOCH) + 60),
        "X-RateLimit-Window": "60",
    }
    allowed.raise_if_refused()
    refusal = rates.check("c")
    assert refusal.headers() == {**allowed.headers(), "Retry-After": "60"}
    with pytest.raises(EdgeError) as info:
        refusal.raise_if_refused()
    assert (info.value.code, info.value.http_status) == (-32003, 429)
    assert info.value.data == {"errorType": "RateLimited", "limit": 1, "window": 60, "retryAfter": 60}
    assert dict(info.value.headers) == refusal.headers()


@pytest.mark.parametrize(("window_s", "shown"), [(0.5, "0.5"), (60.0, "60"), (2_000_000, "2000000")])
def test_rate_window_header_is_a_plain_number(window_s: float, shown: str) -> None:
    assert limiter(FakeClock(), window_s=window_s).check("c").headers()["X-RateLimit-Window"] == shown


def test_rate_limiter_caps_tracked_clients() -> None:
    clock = FakeClock()
    rates = limiter(clock, requests=1, window_s=60, max_clients=3)
    for key in "abcde":
        rates.check(key)
        assert len(rates) <= 3
    assert len(rates) == 3
    # 'a' was forgotten (least recently seen) and starts again with a full bucket; 'e' was not.
    assert rates.check("a").allowed
    assert not rates.check("e").allowed


def test_rate_limiter_forgets_idle_clients() -> None:
    clock = FakeClock()
    rates = limiter(clock, requests=2, window_s=10)  # empty -> full in 10 s
    for key in ("a", "b"):
        rates.check(key)
    clock.advance(5)
    rates.check("c")
    assert len(rates) == 3
    clock.advance(5)
    rates.check("c")
    assert len(rates) == 1  # 'a' and 'b' were full again, so nothing was lost


def test_rate_limiter_survives_a_clock_stepping_back() -> None:
    clock = FakeClock()
    clock.now = 100.0
    rates = limiter(clock, requests=2, window_s=10)
    rates.check("c")
    clock.now = 50.0
    assert rates.check("c").allowed
    assert not rates.check("c").allowed


# ---------------------------------------------------------------------------------- concurrency


async def test_requests_refuse_at_the_limit_at_once() -> None:
    limits = ConcurrencyLimits(ConcurrencyConfig(max_requests_per_client=2))
    with limits.requests.acquire("alice"), limits.requests.acquire("alice"):
        assert limits.requests.in_use("alice") == 2
        with pytest.raises(EdgeError) as info, limits.requests.acquire("alice"):
            pytest.fail("a third request got a slot")
        assert (info.value.code, info.value.http_status) == (-32051, 429)
        assert info.value.data == {"errorType": "ResourceExhausted", "resource": "requestsPerClient", "limit": 2}
        assert "'alice'" in info.value.error.message and "max_requests_per_client" in info.value.error.message
        with limits.requests.acquire("bob"):  # another client is not affected
            assert limits.requests.in_use("bob") == 1
    assert limits.requests.in_use("alice") == 0 and len(limits.requests) == 0


async def test_a_slot_used_as_a_context_manager_is_released_on_exception() -> None:
    slots = ConcurrencyLimits(ConcurrencyConfig()).requests
    with pytest.raises(ValueError, match="boom"), slots.acquire("c"):
        raise ValueError("boom")
    assert slots.in_use("c") == 0 and len(slots) == 0


async def test_a_slot_used_as_a_context_manager_is_released_on_cancellation() -> None:
    slots = Slots(1, resource="r", refusal=lambda key, limit: f"{key} full")
    holding, never = asyncio.Event(), asyncio.Event()

    async def request() -> None:
        with slots.acquire("c"):
            holding.set()
            await never.wait()

    task = asyncio.create_task(request())
    await holding.wait()
    assert slots.in_use("c") == 1
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert slots.in_use("c") == 0
    with slots.acquire("c"):  # the slot is free again
        pass


async def test_contexts_are_counted_per_context() -> None:
    limits = ConcurrencyLimits(ConcurrencyConfig(max_tasks_per_context=5))
    held = [limits.contexts.acquire("ctx-1") for _ in range(5)]
    with pytest.raises(EdgeError) as info:
        limits.contexts.acquire("ctx-1")
    assert info.value.data["resource"] == "tasksPerContext"
    assert "max_tasks_per_context" in info.value.error.message
    other = limits.contexts.acquire("ctx-2")
    assert limits.contexts.in_use("ctx-2") == 1
    # The request counter is separate from the context counter.
    assert limits.requests.in_use("ctx-1") == 0
    held[0].release()
    limits.contexts.acquire("ctx-1").release()
    for slot in [*held, other]:
        slot.release()
    assert len(limits.contexts) == 0


def test_slot_release_is_idempotent() -> None:
    slots = Slots(2, resource="r", refusal=lambda key, limit: "full")
    first, second = slots.acquire("k"), slots.acquire("k")
    first.release()
    first.release()  # a second release must not free the other holder's slot
    assert slots.in_use("k") == 1 and second.held and not first.held
    second.release()
    assert slots.in_use("k") == 0


# ---------------------------------------------------------------------------------- sizes


def test_body_size() -> None:
    check_body_size(1_000_000, MessageLimits())
    with pytest.raises(EdgeError) as info:
        check_body_size(1_000_001, MessageLimits())
    assert (info.value.code, info.value.http_status, info.value.error_type_name) == (-32600, 413, "PayloadTooLarge")
    assert info.value.data == {"errorType": "PayloadTooLarge", "size": 1_000_001, "limit": 1_000_000}


# ---------------------------------------------------------------------------------- timeouts


@pytest.mark.parametrize(
    ("headers", "streaming", "seconds"),
    [
        ({}, False, 30.0),
        ({}, True, 600.0),
        ({"X-A2A-Timeout": "60000"}, False, 60.0),
        ({"x-a2a-timeout": " 1500.5 "}, False, 1.5005),
        ({"X-A2A-Timeout": "1000000"}, False, 300.0),
        ({"X-A2A-Timeout": "1000000"}, True, 600.0),
        ({"X-A2A-Timeout": "450000"}, True, 450.0),
        ({"X-A2A-Timeout": "9" * 400}, False, 300.0),
    ],
)
def test_request_timeout(headers: dict[str, str], streaming: bool, seconds: float) -> None:
    assert request_timeout(headers, TimeoutConfig(), streaming=streaming) == pytest.approx(seconds)


@pytest.mark.parametrize("value", ["soon", "", "-5", "0", "0.0", "1e3", "inf", "nan", "1_000", "12 s"])
def test_request_timeout_refuses_bad_values(value: str) -> None:
    with pytest.raises(EdgeError) as info:
        request_timeout({"X-A2A-Timeout": value}, TimeoutConfig())
    error = info.value
    assert (error.code, error.http_status, error.error_type_name) == (-32600, 400, "InvalidHeader")
    assert "X-A2A-Timeout" in error.error.message and "milliseconds" in error.error.message
    assert error.data["header"] == "X-A2A-Timeout"


# ---------------------------------------------------------------------------------- config


def test_edge_config_has_the_jaf_defaults() -> None:
    edge = EdgeConfig()
    assert edge.auth.mode == "none"
    assert edge.rate_limit == RateLimitConfig(requests=100, window_s=60)
    assert (edge.concurrency.max_requests_per_client, edge.concurrency.max_tasks_per_context) == (10, 5)
    assert (edge.limits.max_message_bytes, edge.limits.max_parts) == (1_000_000, 100)
    assert (edge.limits.max_text_part_bytes, edge.limits.max_data_part_bytes) == (100_000, 1_000_000)
    assert (edge.timeouts.default_s, edge.timeouts.maximum_s, edge.timeouts.streaming_s) == (30, 300, 600)
    assert edge.cors.allow_origins == []
    assert "X-RateLimit-Remaining" in edge.cors.expose_headers


def test_edge_config_from_yaml_shaped_data() -> None:
    edge = EdgeConfig.model_validate(
        {
            "auth": {"mode": "bearer", "tokens": ["t-1", {"name": "ci", "secret": "t-2"}]},
            "rate_limit": None,
            "timeouts": {"default_s": "10"},  # substituted env values arrive as text
            "cors": {"allow_origins": ["https://app.example.com", "http://localhost:3000"]},
        }
    )
    assert edge.rate_limit is None
    assert [c.name for c in edge.auth.tokens] == [None, "ci"]
    assert edge.timeouts.default_s == 10.0


def errors_of(model: type, data: dict[str, Any]) -> str:
    with pytest.raises(ValidationError) as info:
        model.model_validate(data)
    return str(info.value)


@pytest.mark.parametrize(
    ("model", "data", "says"),
    [
        (EdgeConfig, {"rate_limits": {}}, "Extra inputs are not permitted"),
        (EdgeConfig, {"auth": {"mode": "bearer", "tokens": ["t"], "token": "t"}}, "Extra inputs are not permitted"),
        (AuthConfig, {"mode": "oauth"}, "'none', 'bearer', 'api_key' or 'basic'"),
        (AuthConfig, {"mode": "bearer"}, "needs at least one entry in tokens"),
        (AuthConfig, {"mode": "api_key", "tokens": ["t"]}, "tokens is used only with mode 'bearer'"),
        (AuthConfig, {"tokens": ["t"]}, "tokens is used only with mode 'bearer', but mode is 'none'"),
        (AuthConfig, {"mode": "bearer", "tokens": [None]}, "is its environment variable set?"),
        (AuthConfig, {"mode": "bearer", "tokens": [""]}, "is its environment variable set?"),
        (AuthConfig, {"mode": "bearer", "tokens": [{"name": "ci", "secret": None}]}, "environment variable set?"),
        (AuthConfig, {"mode": "bearer", "tokens": [{"secret": "  "}]}, "is its environment variable set?"),
        (AuthConfig, {"mode": "bearer", "tokens": ["tok\n"]}, "trailing whitespace"),
        (AuthConfig, {"mode": "bearer", "tokens": ["a", "a"]}, "same secret twice"),
        (
            AuthConfig,
            {"mode": "api_key", "keys": [{"secret": "a", "name": "x"}, {"secret": "b", "name": "x"}]},
            "same name twice",
        ),
        (AuthConfig, {"mode": "api_key", "keys": [{"secret": "a", "name": "bad name"}]}, "invalid caller name"),
        (AuthConfig, {"mode": "api_key", "keys": [{"secret": "a", "label": "x"}]}, "Extra inputs are not permitted"),
        (AuthConfig, {"mode": "basic", "users": {"a:b": "pw"}}, "hold no ':'"),
        (AuthConfig, {"mode": "basic", "users": {"alice": ""}}, "empty password"),
        (AuthConfig, {"mode": "basic", "realm": 'a"b', "users": {"a": "b"}}, "realm"),
        (RateLimitConfig, {"requests": 0}, "greater than 0"),
        (RateLimitConfig, {"window_s": -1}, "greater than 0"),
        (ConcurrencyConfig, {"max_tasks_per_context": 0}, "greater than 0"),
        (MessageLimits, {"max_parts": 0}, "greater than 0"),
        (TimeoutConfig, {"default_s": 400}, "default_s (400) is above maximum_s (300)"),
        (CorsConfig, {"allow_origins": ["https://app.example.com/"]}, "no path or trailing '/'"),
        (CorsConfig, {"allow_origins": ["app.example.com"]}, "scheme://host[:port]"),
        (CorsConfig, {"allow_origins": ["*"], "allow_credentials": True}, "allow_credentials cannot be used"),
    ],
)
def test_config_validation_errors(model: type, data: dict[str, Any], says: str) -> None:
    assert says in errors_of(model, data)


def test_config_errors_never_show_secrets() -> None:
    for data in ({"mode": "bearer", "tokens": [TOKEN, TOKEN]}, {"mode": "api_key", "tokens": [TOKEN]}):
        assert TOKEN not in errors_of(AuthConfig, data)
        assert TOKEN not in errors_of(EdgeConfig, {"auth": data})


# ---------------------------------------------------------------------------------- layering


def test_protections_import_no_web_framework() -> None:
    # Plain values in, plain values out: the HTTP layer stays the only code that knows Starlette.
    package = Path(__file__).resolve().parents[2] / "gateways" / "http"
    for name in ("protection.py", "auth.py", "limits.py"):
        roots = imported_roots(package / name)
        # gateways: only gateways.errors (the one "agent not found"), itself framework-free.
        allowed = set(sys.stdlib_module_names) | {"pydantic", "mesh", "topics", "gateways"}
        assert roots <= allowed, f"{name} imports {roots}"
    errors = imported_roots(package.parent / "errors.py")
    assert errors <= set(sys.stdlib_module_names) | {"mesh"}, f"errors.py imports {errors}"
