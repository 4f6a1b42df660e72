"""Push notifications: the config store, the SSRF checks, and delivery to a real HTTP receiver."""

from __future__ import annotations

import asyncio
import datetime
import json
import logging
import socket
import ssl
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from agents.push import (
    MAX_CONFIGS_PER_TASK,
    PushConfigStore,
    PushNotifier,
    check_push_url,
    validate_push_url,
)
from mesh.a2a import (
    InvalidParams,
    PushNotificationAuthenticationInfo,
    PushNotificationConfig,
    Task,
    TaskState,
    TaskStatus,
)
from tests.http_receiver import Received, Receiver, serve

ALLOW_HINT = "set allow_private_push_urls: true for this agent"


def make_task(task_id: str = "task-1", seq: int = 0, state: TaskState = TaskState.working) -> Task:
    return Task(id=task_id, context_id="ctx-1", status=TaskStatus(state=state), metadata={"seq": seq})


def push_config(url: str, **kwargs: Any) -> PushNotificationConfig:
    return PushNotificationConfig(url=url, **kwargs)


# --- a real HTTP receiver -------------------------------------------------------------------


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    yield from serve(Receiver())


@dataclass
class FakeDNS:
    """Names the test controls; every other name goes to the real resolver."""

    names: dict[str, list[str]] = field(default_factory=dict)
    lookups: list[str] = field(default_factory=list)


@pytest.fixture
def dns(monkeypatch: pytest.MonkeyPatch) -> FakeDNS:
    fake = FakeDNS()
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host not in fake.names:
            return real(host, port, *args, **kwargs)
        fake.lookups.append(host)
        if not fake.names[host]:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [
            (socket.AF_INET6, socket.SOCK_STREAM, 6, "", (a, port, 0, 0))
            if ":" in a
            else (socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port))
            for a in fake.names[host]
        ]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return fake


@pytest.fixture
def push_log(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.DEBUG, logger="agents.push")
    return caplog


def block_until(event: threading.Event) -> Callable[[Received], None]:
    """A receiver hook holding each request until ``event`` is set."""

    def hook(request: Received) -> None:
        event.wait(timeout=30)

    return hook


def push_tasks() -> list[asyncio.Task[Any]]:
    return [t for t in asyncio.all_tasks() if t.get_name().startswith("push:")]


# --- the config store ------------------------------------------------------------------------


def test_set_assigns_an_id_and_returns_the_bound_config() -> None:
    store = PushConfigStore()
    stored = store.set("t1", push_config("https://example.com/hook", token="tok"))
    config_id = stored.push_notification_config.id
    assert config_id is not None and len(config_id) == 32 and int(config_id, 16) >= 0
    assert stored.task_id == "t1"
    wire = stored.to_wire_dict()
    assert wire["taskId"] == "t1"
    assert wire["pushNotificationConfig"] == {"url": "https://example.com/hook", "id": config_id, "token": "tok"}


def test_set_keeps_a_given_id_and_stores_a_copy() -> None:
    store = PushConfigStore()
    config = push_config("https://example.com/a", id="mine")
    assert store.set("t1", config).push_notification_config.id == "mine"
    config.url = "https://example.com/changed"
    assert store.get("t1", "mine").push_notification_config.url == "https://example.com/a"
    store.get("t1", "mine").push_notification_config.url = "https://example.com/also-changed"
    store.configs_for("t1")[0].url = "https://example.com/changed-too"
    assert store.get("t1").push_notification_config.url == "https://example.com/a"


def test_setting_the_same_id_replaces_in_place() -> None:
    store = PushConfigStore()
    store.set("t1", push_config("https://example.com/a", id="a"))
    store.set("t1", push_config("https://example.com/b", id="b"))
    store.set("t1", push_config("https://example.com/a2", id="a"))
    assert [(c.push_notification_config.id, c.push_notification_config.url) for c in store.list("t1")] == [
        ("a", "https://example.com/a2"),
        ("b", "https://example.com/b"),
    ]


def test_get_without_id_is_the_first_config() -> None:
    store = PushConfigStore()
    store.set("t1", push_config("https://example.com/a", id="a"))
    store.set("t1", push_config("https://example.com/b", id="b"))
    assert store.get("t1").push_notification_config.id == "a"
    assert store.get("t1", "b").push_notification_config.url == "https://example.com/b"


def test_get_of_an_unknown_id_names_it_and_the_known_ones() -> None:
    store = PushConfigStore()
    store.set("t1", push_config("https://example.com/a", id="a"))
    store.set("t1", push_config("https://example.com/b", id="b"))
    with pytest.raises(InvalidParams) as caught:
        store.get("t1", "zzz")
    assert caught.value.code == -32602
    message = caught.value.error.message
    assert "'zzz'" in message and "'t1'" in message and "['a', 'b']" in message
    assert caught.value.data == {"taskId": "t1", "pushNotificationConfigId": "zzz", "knownIds": ["a", "b"]}


@pytest.mark.parametrize("config_id", [None, "zzz"])
def test_get_on_a_task_without_configs_says_how_to_set_one(config_id: str | None) -> None:
    with pytest.raises(InvalidParams) as caught:
        PushConfigStore().get("t1", config_id)
    assert caught.value.code == -32602
    assert "task 't1' has no push notification config" in caught.value.error.message
    assert "tasks/pushNotificationConfig/set" in caught.value.error.message


def test_list_delete_and_drop_task() -> None:
    store = PushConfigStore()
    assert store.list("t1") == [] and store.configs_for("t1") == []
    store.set("t1", push_config("https://example.com/a", id="a"))
    store.set("t1", push_config("https://example.com/b", id="b"))
    store.set("t2", push_config("https://example.com/c", id="c"))
    store.delete("t1", "a")
    assert [c.push_notification_config.id for c in store.list("t1")] == ["b"]
    store.delete("t1", "a")  # idempotent: a redelivered request must not fail
    store.delete("nope", "a")
    store.drop_task("t1")
    store.drop_task("t1")
    assert store.list("t1") == []
    assert [c.id for c in store.configs_for("t2")] == ["c"]


def test_the_per_task_cap_refuses_more_but_allows_replacing() -> None:
    store = PushConfigStore()
    for n in range(MAX_CONFIGS_PER_TASK):
        store.set("t1", push_config(f"https://example.com/{n}", id=str(n)))
    with pytest.raises(InvalidParams) as caught:
        store.set("t1", push_config("https://example.com/extra"))
    assert caught.value.code == -32602
    assert f"{MAX_CONFIGS_PER_TASK} push notification configs (the limit)" in caught.value.error.message
    store.set("t1", push_config("https://example.com/replaced", id="3"))
    store.set("t2", push_config("https://example.com/other"))
    assert len(store.list("t1")) == MAX_CONFIGS_PER_TASK
    assert PushConfigStore(max_per_task=1).set("t", push_config("https://example.com/")).task_id == "t"


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (push_config("ftp://example.com/hook"), "must use http or https, not 'ftp'"),
        (push_config("example.com/hook"), "must use http or https, not 'no scheme'"),
        (push_config("http:///hook"), "has no host"),
        (push_config("https://user:pw@example.com/"), "must not carry user info"),
        (push_config("http://example.com:99999/"), "is not a valid URL"),
        (
            push_config(
                "https://example.com/",
                authentication=PushNotificationAuthenticationInfo(schemes=[], credentials="x"),
            ),
            "credentials but no scheme",
        ),
        (push_config("https://example.com/", token="a\r\nX-Evil: 1"), "token must be printable ASCII"),
        (
            push_config(
                "https://example.com/",
                authentication=PushNotificationAuthenticationInfo(schemes=["Bearer"], credentials="é"),
            ),
            "authentication.credentials must be printable ASCII",
        ),
    ],
)
def test_set_refuses_a_bad_config(config: PushNotificationConfig, expected: str) -> None:
    store = PushConfigStore()
    with pytest.raises(InvalidParams) as caught:
        store.set("t1", config)
    assert caught.value.code == -32602
    assert expected in caught.value.error.message
    assert store.list("t1") == []


# --- URL safety --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://127.0.0.1:8080/hook", "loopback"),
        ("http://localhost/hook", "loopback"),
        ("http://[::1]/hook", "loopback"),
        ("http://10.1.2.3/hook", "private"),
        ("http://172.16.0.1/hook", "private"),
        ("http://192.168.1.1/hook", "private"),
        ("http://[fc00::1]/hook", "private"),
        ("http://169.254.169.254/latest/meta-data/", "link-local"),
        ("http://[fe80::1]/hook", "link-local"),
        ("http://[::ffff:127.0.0.1]/hook", "loopback"),
        ("http://[::ffff:169.254.169.254]/", "link-local"),
        ("http://[2002:7f00:1::]/hook", "loopback"),  # 6to4 of 127.0.0.1
        ("http://0.0.0.0/hook", "unspecified"),
        ("http://224.0.0.1/hook", "multicast"),
        ("http://240.0.0.1/hook", "reserved"),
        ("http://100.64.0.1/hook", "non-global"),
    ],
)
def test_non_public_addresses_are_refused_with_the_way_to_allow_them(url: str, reason: str) -> None:
    with pytest.raises(InvalidParams) as caught:
        validate_push_url(url, allow_private=False)
    assert caught.value.code == -32602
    message = caught.value.error.message
    assert f"a {reason} address" in message and ALLOW_HINT in message


@pytest.mark.parametrize("url", ["http://127.0.0.1:8080/hook", "http://localhost/", "http://10.0.0.1/"])
def test_allow_private_allows_them(url: str) -> None:
    validate_push_url(url, allow_private=True)


@pytest.mark.parametrize(
    "url", ["http://8.8.8.8/hook", "https://8.8.8.8:8443/a?b=c", "https://[2001:4860:4860::8888]/hook"]
)
def test_public_literal_addresses_pass(url: str) -> None:
    validate_push_url(url, allow_private=False)  # validation only: nothing is sent there


@pytest.mark.parametrize(
    "url", ["ftp://8.8.8.8/", "file:///etc/passwd", "javascript:alert(1)", "gopher://8.8.8.8/", "//8.8.8.8/"]
)
@pytest.mark.parametrize("allow_private", [False, True])
def test_non_http_schemes_are_refused(url: str, allow_private: bool) -> None:
    with pytest.raises(InvalidParams, match="must use http or https"):
        validate_push_url(url, allow_private=allow_private)


def test_every_resolved_address_must_be_public(dns: FakeDNS) -> None:
    dns.names["mixed.test"] = ["8.8.8.8", "10.0.0.1"]
    dns.names["public.test"] = ["8.8.8.8", "2001:4860:4860::8888"]
    with pytest.raises(InvalidParams, match=r"'mixed\.test' resolves to 10\.0\.0\.1, a private address"):
        validate_push_url("https://mixed.test/hook", allow_private=False)
    validate_push_url("https://public.test/hook", allow_private=False)


async def test_an_unresolvable_host_is_refused_even_when_private_is_allowed(dns: FakeDNS) -> None:
    dns.names["nowhere.test"] = []
    with pytest.raises(InvalidParams, match=r"'nowhere\.test' does not resolve") as caught:
        await check_push_url("https://nowhere.test/hook", allow_private=True)
    assert caught.value.code == -32602


async def test_the_async_check_and_the_notifier_check_refuse_loopback() -> None:
    with pytest.raises(InvalidParams, match=ALLOW_HINT):
        await check_push_url("http://localhost:1/", allow_private=False)
    async with PushNotifier() as notifier:
        with pytest.raises(InvalidParams, match=ALLOW_HINT):
            await notifier.check_url("http://[::ffff:127.0.0.1]/")
    await PushNotifier(allow_private=True).check_url("http://localhost:1/")


# --- delivery ----------------------------------------------------------------------------------


async def test_the_body_is_the_task_json_with_the_auth_and_token_headers(receiver: Receiver) -> None:
    task = make_task(state=TaskState.completed)
    config = push_config(
        receiver.url("/hook?route=1"),
        token="notify-token",
        authentication=PushNotificationAuthenticationInfo(schemes=["Bearer", "Basic"], credentials="secret-jwt"),
    )
    async with PushNotifier(allow_private=True) as notifier:
        notifier.notify(task, [config])
        [request] = await receiver.wait_for(1)
    assert (request.method, request.path) == ("POST", "/hook?route=1")
    assert request.headers["content-type"] == "application/json"
    assert request.headers["authorization"] == "Bearer secret-jwt"
    assert request.headers["x-a2a-notification-token"] == "notify-token"
    assert request.headers["host"] == f"127.0.0.1:{receiver.port}"
    assert request.task == task
    wire = json.loads(request.body)
    assert wire["contextId"] == "ctx-1" and wire["kind"] == "task" and wire["status"]["state"] == "completed"


async def test_basic_credentials_are_sent_as_given(receiver: Receiver) -> None:
    auth = PushNotificationAuthenticationInfo(schemes=["Basic"], credentials="dXNlcjpwYXNz")
    async with PushNotifier(allow_private=True) as notifier:
        notifier.notify(make_task(), [push_config(receiver.url(), authentication=auth)])
        [request] = await receiver.wait_for(1)
    assert request.headers["authorization"] == "Basic dXNlcjpwYXNz"


@pytest.mark.parametrize(
    "authentication", [None, PushNotificationAuthenticationInfo(schemes=["Bearer"], credentials=None)]
)
async def test_no_auth_or_token_header_without_them(
    receiver: Receiver, authentication: PushNotificationAuthenticationInfo | None
) -> None:
    async with PushNotifier(allow_private=True) as notifier:
        notifier.notify(make_task(), [push_config(receiver.url(), authentication=authentication)])
        [request] = await receiver.wait_for(1)
    assert "authorization" not in request.headers
    assert "x-a2a-notification-token" not in request.headers


async def test_each_config_gets_the_update(receiver: Receiver) -> None:
    configs = [push_config(receiver.url("/a")), push_config(receiver.url("/b"), token="b")]
    async with PushNotifier(allow_private=True) as notifier:
        notifier.notify(make_task(), configs)
        notifier.notify(make_task(), [])
        requests = await receiver.wait_for(2)
    assert sorted(r.path for r in requests) == ["/a", "/b"]


async def test_a_5xx_is_retried_until_it_succeeds(receiver: Receiver, push_log: pytest.LogCaptureFixture) -> None:
    receiver.responses.extend([(500, {}), (503, {})])
    notifier = PushNotifier(allow_private=True, max_attempts=3, backoff_s=0.01)
    notifier.notify(make_task(seq=7), [push_config(receiver.url())])
    await notifier.aclose()
    assert len(receiver.requests) == 3
    assert [r.task.metadata for r in receiver.requests] == [{"seq": 7}] * 3
    assert "failed" not in push_log.text


async def test_a_5xx_gives_up_after_max_attempts(receiver: Receiver, push_log: pytest.LogCaptureFixture) -> None:
    receiver.responses.extend([(500, {})] * 5)
    notifier = PushNotifier(allow_private=True, max_attempts=2, backoff_s=0.01)
    notifier.notify(make_task(), [push_config(receiver.url())])
    await notifier.aclose()
    assert len(receiver.requests) == 2
    assert "failed after 2 attempts: HTTP 500" in push_log.text


async def test_a_4xx_is_not_retried(receiver: Receiver, push_log: pytest.LogCaptureFixture) -> None:
    receiver.responses.append((400, {}))
    notifier = PushNotifier(allow_private=True, backoff_s=0.01)
    notifier.notify(make_task(), [push_config(receiver.url())])
    await notifier.aclose()
    assert len(receiver.requests) == 1
    assert "answered HTTP 400; not retried" in push_log.text


async def test_redirects_are_not_followed(receiver: Receiver, push_log: pytest.LogCaptureFixture) -> None:
    receiver.responses.append((302, {"Location": receiver.url("/elsewhere")}))
    notifier = PushNotifier(allow_private=True, backoff_s=0.01)
    notifier.notify(make_task(), [push_config(receiver.url("/hook"))])
    await notifier.aclose()
    assert [r.path for r in receiver.requests] == ["/hook"]
    assert "HTTP 302 (redirects are not followed)" in push_log.text


async def test_a_dead_receiver_never_raises_and_secrets_stay_out_of_the_log(
    push_log: pytest.LogCaptureFixture,
) -> None:
    with socket.socket() as bound_not_listening:  # connecting to it is refused
        bound_not_listening.bind(("127.0.0.1", 0))
        port = bound_not_listening.getsockname()[1]
        config = push_config(
            f"http://127.0.0.1:{port}/hook?sig=QUERY-SECRET",
            token="TOKEN-SECRET",
            authentication=PushNotificationAuthenticationInfo(schemes=["Bearer"], credentials="CRED-SECRET"),
        )
        notifier = PushNotifier(allow_private=True, max_attempts=2, backoff_s=0.01, timeout_s=5)
        notifier.notify(make_task(), [config])
        await notifier.aclose()
    assert f"push to http://127.0.0.1:{port}/hook failed after 2 attempts" in push_log.text
    assert "SECRET" not in push_log.text


async def test_an_unexpected_error_is_logged_by_type_and_later_updates_still_go(
    receiver: Receiver, push_log: pytest.LogCaptureFixture
) -> None:
    bad = push_config(receiver.url("/bad"), token="SECRET\r\nX-Injected: 1")  # bypasses the store's check
    async with PushNotifier(allow_private=True) as notifier:
        notifier.notify(make_task(seq=1), [bad])
        notifier.notify(make_task(seq=2), [push_config(receiver.url("/good"))])
    assert [(r.path, r.task.metadata) for r in receiver.requests] == [("/good", {"seq": 2})]
    assert "push to http://127.0.0.1" in push_log.text and "/bad failed: ValueError" in push_log.text
    assert "SECRET" not in push_log.text


async def test_20_updates_of_one_task_arrive_in_order(receiver: Receiver) -> None:
    async with PushNotifier(allow_private=True) as notifier:
        for seq in range(20):
            notifier.notify(make_task(seq=seq), [push_config(receiver.url())])
        requests = await receiver.wait_for(20)
    assert [r.task.metadata for r in requests] == [{"seq": seq} for seq in range(20)]


async def test_a_slow_task_does_not_hold_up_another(receiver: Receiver) -> None:
    b_arrived = threading.Event()
    a_saw_b: list[bool] = []

    def hook(request: Received) -> None:
        if request.path == "/a":
            a_saw_b.append(b_arrived.wait(timeout=30))
        else:
            b_arrived.set()

    receiver.hook = hook
    async with PushNotifier(allow_private=True, timeout_s=60) as notifier:
        notifier.notify(make_task("task-a"), [push_config(receiver.url("/a"))])
        await receiver.wait_for(1)  # task-a's POST is in flight, blocked until /b arrives
        notifier.notify(make_task("task-b"), [push_config(receiver.url("/b"))])
    assert a_saw_b == [True]


async def test_a_task_falling_behind_drops_its_oldest_pending_updates(
    receiver: Receiver, push_log: pytest.LogCaptureFixture
) -> None:
    release = threading.Event()
    receiver.hook = block_until(release)
    async with PushNotifier(allow_private=True, max_pending=3) as notifier:
        notifier.notify(make_task(seq=0), [push_config(receiver.url())])
        await receiver.wait_for(1)
        for seq in range(1, 6):
            notifier.notify(make_task(seq=seq), [push_config(receiver.url())])
        release.set()
    assert [r.task.metadata for r in receiver.requests] == [{"seq": s} for s in (0, 3, 4, 5)]
    assert "oldest pending update dropped" in push_log.text


async def test_aclose_waits_for_pending_deliveries(receiver: Receiver) -> None:
    notifier = PushNotifier(allow_private=True)
    for seq in range(5):
        notifier.notify(make_task("t1", seq), [push_config(receiver.url("/one"))])
        notifier.notify(make_task("t2", seq), [push_config(receiver.url("/two"))])
    assert len(push_tasks()) == 2
    await notifier.aclose()
    assert len(receiver.requests) == 10
    assert push_tasks() == []


async def test_aclose_is_bounded_and_leaves_no_worker(receiver: Receiver, push_log: pytest.LogCaptureFixture) -> None:
    release = threading.Event()
    receiver.hook = block_until(release)
    notifier = PushNotifier(allow_private=True, timeout_s=60)
    try:
        notifier.notify(make_task(), [push_config(receiver.url())])
        await receiver.wait_for(1)
        await notifier.aclose(timeout_s=0.05)
        assert push_tasks() == []
        assert "undelivered" in push_log.text
        notifier.notify(make_task(seq=1), [push_config(receiver.url())])  # closed: dropped
        assert push_tasks() == []
        assert "notifier is closed" in push_log.text
    finally:
        release.set()
    assert len(receiver.requests) == 1


async def test_the_address_is_checked_again_at_delivery(
    receiver: Receiver, dns: FakeDNS, push_log: pytest.LogCaptureFixture
) -> None:
    dns.names["rebind.test"] = ["8.8.8.8"]
    config = push_config(receiver.url(host="rebind.test"))
    notifier = PushNotifier()
    await notifier.check_url(config.url)  # public when set...
    dns.names["rebind.test"] = ["127.0.0.1"]  # ...loopback when delivered
    notifier.notify(make_task(), [config])
    await notifier.aclose()
    assert receiver.requests == []
    assert "push to http://rebind.test" in push_log.text and "a loopback address" in push_log.text


async def test_an_unresolvable_host_at_delivery_is_skipped(dns: FakeDNS, push_log: pytest.LogCaptureFixture) -> None:
    dns.names["gone.test"] = []
    async with PushNotifier(allow_private=True) as notifier:
        notifier.notify(make_task(), [push_config("https://gone.test/hook")])
    assert "push to https://gone.test:443/hook skipped" in push_log.text and "does not resolve" in push_log.text


async def test_the_connection_goes_to_the_checked_address_with_the_host_name(receiver: Receiver, dns: FakeDNS) -> None:
    dns.names["hook.test"] = ["127.0.0.1"]
    async with PushNotifier(allow_private=True) as notifier:
        notifier.notify(make_task(), [push_config(receiver.url(host="hook.test"))])
        [request] = await receiver.wait_for(1)
    assert request.headers["host"] == f"hook.test:{receiver.port}"
    assert dns.lookups == ["hook.test"]  # one lookup: the check; the connection reuses it


def _self_signed(tmp_path: Path, name: str) -> Path:
    x509 = pytest.importorskip("cryptography.x509")
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    pem = tmp_path / "cert.pem"
    pem.write_bytes(
        cert.public_bytes(serialization.Encoding.PEM)
        + key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return pem


async def test_https_verifies_the_host_name_on_the_pinned_connection(tmp_path: Path, dns: FakeDNS) -> None:
    pem = _self_signed(tmp_path, "hook.test")
    server_tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_tls.load_cert_chain(pem)
    client_tls = ssl.create_default_context(cafile=pem)
    dns.names["hook.test"] = ["127.0.0.1"]
    dns.names["other.test"] = ["127.0.0.1"]
    for tls_receiver in serve(Receiver(), server_tls):
        notifier = PushNotifier(allow_private=True, ssl_context=client_tls, max_attempts=1)
        notifier.notify(make_task(seq=1), [push_config(tls_receiver.url("/ok", host="hook.test"))])
        notifier.notify(make_task(seq=2), [push_config(tls_receiver.url("/bad", host="other.test"))])
        await notifier.aclose()
        assert [(r.path, r.task.metadata) for r in tls_receiver.requests] == [("/ok", {"seq": 1})]
        assert tls_receiver.requests[0].headers["host"] == f"hook.test:{tls_receiver.port}"


async def test_deliveries_take_no_thread_of_the_default_pool(receiver: Receiver) -> None:
    """Slow webhooks must not starve the loop's default executor (journal loads, file reads and
    every other to_thread share it): a delivery goes out while that pool is fully taken."""
    loop = asyncio.get_running_loop()
    pool = ThreadPoolExecutor(max_workers=1)
    loop.set_default_executor(pool)
    taken = threading.Event()
    held = loop.run_in_executor(None, taken.wait, 10)  # the pool's only thread, held
    try:
        async with PushNotifier(allow_private=True) as notifier:
            notifier.notify(make_task(seq=7), [push_config(receiver.url("/starved"))])
            while not receiver.requests and not held.done():
                await asyncio.sleep(0.01)
            assert [(r.path, r.task.metadata) for r in receiver.requests] == [("/starved", {"seq": 7})]
            assert not held.done()  # delivered while the default pool was still taken
    finally:
        taken.set()
        await held
        pool.shutdown(wait=False)
