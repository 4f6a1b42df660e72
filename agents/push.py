"""Push notifications: the webhook configs of each task, URL safety, and delivery.

The runtime keeps one :class:`PushConfigStore` and one :class:`PushNotifier` per agent::

    await notifier.check_url(config.url)                      # pushNotificationConfig/set
    stored = store.set(task_id, config)
    notifier.notify(task, store.configs_for(task.id))         # on every task update
    store.drop_task(task_id)                                  # when the task is forgotten
    await notifier.aclose()                                   # on shutdown

A delivery is A2A 0.3's: ``POST`` of the Task JSON (camelCase) to the config's URL with
``Authorization: <first scheme> <credentials>`` when ``authentication`` has credentials and
``X-A2A-Notification-Token`` when ``token`` is set.

SSRF: a URL must be http(s) without user info, and every address its host resolves to must be
public unless the agent sets ``allow_private_push_urls: true``. The check runs at ``set`` and
again before each delivery, and the connection goes to the addresses just checked (no second
lookup, so DNS rebinding cannot slip in between). Redirects are never followed (a 3xx answer
is a failed delivery) and environment proxies are not used.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import functools
import ipaddress
import json
import logging
import re
import socket
import ssl
import uuid
from collections import deque
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType
from typing import NamedTuple
from urllib.parse import urlsplit

from agents.journal import NullJournal, TaskJournal
from mesh.a2a import InvalidParams, PushNotificationConfig, Task, TaskPushNotificationConfig
from mesh.profile.v1 import push_payload_v1

__all__ = ["MAX_CONFIGS_PER_TASK", "PushConfigStore", "PushNotifier", "check_push_url", "validate_push_url"]

log = logging.getLogger(__name__)

MAX_CONFIGS_PER_TASK = 10
_ALLOW_HINT = "set allow_private_push_urls: true for this agent to allow it"


class PushConfigStore:
    """The push configs of each task, written through to the task journal.

    Task existence is the runtime's business (a forgotten task's configs leave the journal
    with it).
    """

    def __init__(self, *, max_per_task: int = MAX_CONFIGS_PER_TASK, journal: TaskJournal | None = None) -> None:
        self._max = max_per_task
        self._tasks: dict[str, dict[str, PushNotificationConfig]] = {}
        self._journal: TaskJournal = journal if journal is not None else NullJournal()

    def restore(self, stored: dict[str, builtins.list[bytes]]) -> None:
        """Take back the configs the journal held (task id -> JSON objects)."""
        for task_id, configs in stored.items():
            parsed = {}
            for raw in configs:
                try:
                    config = PushNotificationConfig.model_validate_json(raw)
                except ValueError:
                    log.warning("dropped a stored push config of task %s that no longer parses", task_id)
                    continue
                parsed[config.id or uuid.uuid4().hex] = config
            if parsed:
                self._tasks[task_id] = parsed

    def _write_through(self, task_id: str) -> None:
        configs = self._tasks.get(task_id, {})
        self._journal.push_configs(task_id, [c.to_json_bytes() for c in configs.values()])

    def set(self, task_id: str, config: PushNotificationConfig) -> TaskPushNotificationConfig:
        """Store a copy of ``config`` (``id`` assigned when missing); the same id replaces.

        Checks the URL's form and the header values, not where the host resolves: await
        :func:`check_push_url` (or :meth:`PushNotifier.check_url`) first.
        """
        _parse_url(config.url)
        _check_header_values(config)
        config_id = config.id or uuid.uuid4().hex
        configs = self._tasks.setdefault(task_id, {})
        if config_id not in configs and len(configs) >= self._max:
            raise InvalidParams(
                f"task {task_id!r} already has {self._max} push notification configs (the limit);"
                " delete one, or set an existing id to replace it",
                data={"taskId": task_id, "limit": self._max},
            )
        configs[config_id] = config.model_copy(deep=True, update={"id": config_id})
        self._write_through(task_id)
        return _bound(task_id, configs[config_id])

    def get(self, task_id: str, config_id: str | None = None) -> TaskPushNotificationConfig:
        """The config ``config_id`` of the task; ``None``: its first one. Unknown: InvalidParams."""
        configs = self._tasks.get(task_id, {})
        if config_id is None and configs:
            return _bound(task_id, next(iter(configs.values())))
        if config_id is not None and config_id in configs:
            return _bound(task_id, configs[config_id])
        known = list(configs)
        wanted = "" if config_id is None else f" with id {config_id!r}"
        hint = f"its config ids are {known}" if known else "set one with tasks/pushNotificationConfig/set"
        raise InvalidParams(
            f"task {task_id!r} has no push notification config{wanted}; {hint}",
            data={"taskId": task_id, "pushNotificationConfigId": config_id, "knownIds": known},
        )

    def list(self, task_id: str) -> list[TaskPushNotificationConfig]:
        """The task's configs in the order they were first set (empty when none)."""
        return [_bound(task_id, c) for c in self._tasks.get(task_id, {}).values()]

    def delete(self, task_id: str, config_id: str) -> None:
        """Remove a config; idempotent (a redelivered MQTT request must not fail)."""
        configs = self._tasks.get(task_id)
        if configs is not None:
            configs.pop(config_id, None)
            if not configs:
                del self._tasks[task_id]
            self._write_through(task_id)

    def drop_task(self, task_id: str) -> None:
        """Forget every config of the task."""
        self._tasks.pop(task_id, None)

    def configs_for(self, task_id: str) -> builtins.list[PushNotificationConfig]:  # list: the method above
        """Copies of the task's configs, for :meth:`PushNotifier.notify`."""
        return [c.model_copy(deep=True) for c in self._tasks.get(task_id, {}).values()]


def _bound(task_id: str, config: PushNotificationConfig) -> TaskPushNotificationConfig:
    return TaskPushNotificationConfig(task_id=task_id, push_notification_config=config.model_copy(deep=True))


def _check_header_values(config: PushNotificationConfig) -> None:
    auth = config.authentication
    if auth is not None and auth.credentials and not auth.schemes:
        raise InvalidParams(
            "push notification authentication has credentials but no scheme; name it in"
            " authentication.schemes, e.g. ['Bearer']",
            data={"field": "authentication.schemes"},
        )
    values = {"token": config.token}
    if auth is not None:
        values["authentication.schemes[0]"] = auth.schemes[0] if auth.schemes else None
        values["authentication.credentials"] = auth.credentials
    for field, value in values.items():
        # They become HTTP header values: CR/LF would inject headers, non-ASCII does not encode.
        if value is not None and not (value.isascii() and value.isprintable()):
            raise InvalidParams(
                f"push notification {field} must be printable ASCII (it is sent in an HTTP header)",
                data={"field": field},
            )


class _Target(NamedTuple):
    """Where a push URL points: host, port and the request path (with query)."""

    https: bool
    host: str
    port: int
    path: str

    def __str__(self) -> str:
        # For logs: no user info (refused anyway) and no query (it may carry a secret).
        scheme = "https" if self.https else "http"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{scheme}://{host}:{self.port}{self.path.split('?', 1)[0]}"


def _parse_url(url: str) -> _Target:
    def refuse(problem: str) -> InvalidParams:
        return InvalidParams(f"push URL {problem}", data={"url": url})

    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise refuse(f"is not a valid URL: {exc}") from None
    if parts.scheme not in ("http", "https"):
        raise refuse(f"must use http or https, not {parts.scheme or 'no scheme'!r}")
    if not parts.hostname:
        raise refuse("has no host")
    if parts.username is not None or parts.password is not None:
        raise refuse("must not carry user info; put credentials in authentication")
    https = parts.scheme == "https"
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return _Target(https, parts.hostname, port or (443 if https else 80), path)


def non_public_reason(address: str) -> str | None:
    """Why ``address`` is not a public unicast address, or ``None`` when it is (also the remote
    agents' redirect check, :mod:`agents.remote.http`)."""
    ip = ipaddress.ip_address(address)
    candidates: list[ipaddress.IPv4Address | ipaddress.IPv6Address] = [ip]
    if isinstance(ip, ipaddress.IPv6Address):
        # IPv4-mapped (::ffff:a.b.c.d) and 6to4 (2002::/16) forms reach an IPv4 address.
        candidates[:0] = [v4 for v4 in (ip.ipv4_mapped, ip.sixtofour) if v4 is not None]
    for candidate in candidates:
        for kind in ("unspecified", "loopback", "link_local", "multicast", "reserved", "private"):
            if getattr(candidate, f"is_{kind}"):
                return kind.replace("_", "-")
        if not candidate.is_global:  # e.g. 100.64.0.0/10, carrier-grade NAT
            return "non-global"
    return None


def _resolve(target: _Target, *, allow_private: bool) -> list[str]:
    """The addresses of the target's host, refused unless all are public (or allowed)."""
    try:
        infos = socket.getaddrinfo(target.host, target.port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise InvalidParams(
            f"push URL host {target.host!r} does not resolve: {exc}", data={"host": target.host}
        ) from None
    inet = (socket.AF_INET, socket.AF_INET6)
    addresses = list(dict.fromkeys(str(info[4][0]) for info in infos if info[0] in inet))
    if not addresses:
        raise InvalidParams(f"push URL host {target.host!r} has no IP address", data={"host": target.host})
    if not allow_private:
        for address in addresses:
            reason = non_public_reason(address)
            if reason is not None:
                raise InvalidParams(
                    f"push URL host {target.host!r} resolves to {address}, a {reason} address;"
                    f" push notifications go to public addresses only: {_ALLOW_HINT}",
                    data={"host": target.host, "address": address},
                )
    return addresses


def validate_push_url(url: str, *, allow_private: bool) -> None:
    """Refuse (``InvalidParams``) a push URL that is not http(s) or reaches a non-public address.

    Resolves the host, so it blocks: from async code, await :func:`check_push_url`.
    """
    _resolve(_parse_url(url), allow_private=allow_private)


async def check_push_url(url: str, *, allow_private: bool) -> None:
    """:func:`validate_push_url` with the DNS lookup off the event loop."""
    await asyncio.to_thread(validate_push_url, url, allow_private=allow_private)


def _headers(config: PushNotificationConfig) -> dict[str, str]:
    headers = {"Content-Type": "application/json"}
    auth = config.authentication
    if auth is not None and auth.credentials and auth.schemes:
        headers["Authorization"] = f"{auth.schemes[0]} {auth.credentials}"
    if config.token:
        headers["X-A2A-Notification-Token"] = config.token
    return headers


_BAD_HEADER = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


class _DeliveryError(Exception):
    """A delivery that failed on the way (connection, TLS, a reply that is not HTTP)."""


async def _post_pinned(
    target: _Target,
    addresses: Sequence[str],
    tls: ssl.SSLContext | None,
    headers: dict[str, str],
    body: bytes,
) -> int:
    """POST ``body`` to the first of ``addresses`` that accepts a connection, with the Host header
    and TLS name of the target's host; the answer's HTTP status. Asyncio streams: nothing blocks
    the loop or takes a thread of the default pool while a slow webhook answers."""
    for name, value in headers.items():  # the store checks them; a header must never split a request
        if _BAD_HEADER.search(name) or _BAD_HEADER.search(value):
            raise ValueError(f"invalid push header {name!r}: control characters")
    error: BaseException = _DeliveryError(f"no address to connect to for {target.host}")
    for address in addresses:
        try:
            reader, writer = await asyncio.open_connection(
                address, target.port, ssl=tls, server_hostname=target.host if tls else None
            )
        except (OSError, ssl.SSLError) as exc:
            error = exc
            continue
        try:
            default_port = 443 if tls else 80
            host = target.host if ":" not in target.host else f"[{target.host}]"
            lines = [
                f"POST {target.path} HTTP/1.1",
                f"Host: {host}" + ("" if target.port == default_port else f":{target.port}"),
                "Content-Type: application/json",
                f"Content-Length: {len(body)}",
                "Connection: close",
                "Accept-Encoding: identity",
                *(f"{name}: {value}" for name, value in headers.items() if name.lower() != "content-type"),
            ]
            writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
            await writer.drain()
            status_line = await reader.readline()  # bounded by the stream's 64 KiB line limit
            match = re.match(rb"HTTP/1\.[01] (\d{3})[ \r\n]", status_line)
            if match is None:
                raise _DeliveryError(f"the webhook did not answer HTTP: {status_line[:60]!r}")
            return int(match.group(1))
        finally:
            writer.close()
            with contextlib.suppress(OSError, ssl.SSLError):
                await writer.wait_closed()
    raise error


#: The bodies of one update by A2A version, and the endpoints (target, headers, version) to POST them to.
_Notification = tuple[dict[str, bytes], list[tuple[_Target, dict[str, str], str]]]


def _version(config: PushNotificationConfig) -> str:
    """The A2A version of the client that created ``config``: what its webhook reads."""
    return "1.0" if (config.a2a_version or "").startswith("1") else "0.3"


def _body(task: Task, version: str) -> bytes:
    """A notification: the 0.3 Task, or for a 1.0 webhook a ``StreamResponse`` holding the Task."""
    if version == "1.0":
        return json.dumps(push_payload_v1(task), separators=(",", ":"), ensure_ascii=False).encode()
    return task.to_json_bytes()


class PushNotifier:
    """Delivers task snapshots to webhooks: in order per task, tasks concurrently, never raising.

    Each task with pending notifications has one worker; it ends when the task's queue is
    empty. A queue holds at most ``max_pending`` snapshots: past that the oldest pending one
    is dropped (each is a whole Task, so the latest state still arrives) and a warning logged.
    """

    def __init__(
        self,
        *,
        allow_private: bool = False,
        timeout_s: float = 5.0,
        max_attempts: int = 3,
        backoff_s: float = 0.2,
        max_pending: int = 100,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self._allow_private = allow_private
        self._timeout_s = timeout_s
        self._max_attempts = max(1, max_attempts)
        self._backoff_s = backoff_s
        self._max_pending = max_pending
        self._ssl_context = ssl_context
        self._queues: dict[str, deque[_Notification]] = {}
        self._workers: dict[str, asyncio.Task[None]] = {}
        self._closed = False
        self._resolver: ThreadPoolExecutor | None = None  # made at the first delivery: most agents have none

    async def check_url(self, url: str) -> None:
        """:func:`check_push_url` with this notifier's ``allow_private``."""
        await check_push_url(url, allow_private=self._allow_private)

    def notify(self, task: Task, configs: Sequence[PushNotificationConfig]) -> None:
        """Queue a snapshot of ``task`` for each config (from the event loop); never waits or raises."""
        if not configs:
            return
        if self._closed:
            log.warning("push notifier is closed; update of task %s not sent", task.id)
            return
        endpoints = []
        for config in configs:
            try:
                endpoints.append((_parse_url(config.url), _headers(config), _version(config)))
            except InvalidParams as exc:
                log.warning("push config %s of task %s skipped: %s", config.id, task.id, exc)
        if not endpoints:
            return
        bodies = {version: _body(task, version) for version in {version for _, _, version in endpoints}}
        queue = self._queues.get(task.id)
        if queue is None:
            queue = self._queues[task.id] = deque(maxlen=self._max_pending)
            self._workers[task.id] = asyncio.create_task(self._work(task.id, queue), name=f"push:{task.id}")
        elif len(queue) == queue.maxlen:
            log.warning("push notifications of task %s fall behind; oldest pending update dropped", task.id)
        queue.append((bodies, endpoints))

    async def aclose(self, timeout_s: float = 10.0) -> None:
        """Take no more updates; wait up to ``timeout_s`` for pending ones, then cancel the rest."""
        self._closed = True
        workers = list(self._workers.values())
        if not workers:
            self._shutdown_resolver()
            return
        _, late = await asyncio.wait(workers, timeout=timeout_s)
        if late:
            log.warning("push notifier closed with updates of %d tasks undelivered", len(late))
            for worker in late:
                worker.cancel()
            await asyncio.gather(*late, return_exceptions=True)
        self._shutdown_resolver()

    def _shutdown_resolver(self) -> None:
        if self._resolver is not None:
            self._resolver.shutdown(wait=False)

    def _resolving_threads(self) -> ThreadPoolExecutor:
        if self._resolver is None:
            self._resolver = ThreadPoolExecutor(max_workers=4, thread_name_prefix="push-resolve")
        return self._resolver

    async def __aenter__(self) -> PushNotifier:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def _work(self, task_id: str, queue: deque[_Notification]) -> None:
        try:
            while queue:
                bodies, endpoints = queue.popleft()
                sends = (self._deliver(target, headers, bodies[version]) for target, headers, version in endpoints)
                results = await asyncio.gather(*sends, return_exceptions=True)
                for (target, _, _), result in zip(endpoints, results, strict=True):
                    if isinstance(result, Exception):  # its message might quote a header: type only
                        log.error("push to %s failed: %s", target, type(result).__name__)
        finally:
            # No await between the empty check and here: notify() cannot slip an item in.
            del self._queues[task_id], self._workers[task_id]

    async def _deliver(self, target: _Target, headers: dict[str, str], body: bytes) -> None:
        try:
            # Its own threads: getaddrinfo blocks, and slow resolvers must not hold the default pool.
            addresses = await asyncio.get_running_loop().run_in_executor(
                self._resolving_threads(), functools.partial(_resolve, target, allow_private=self._allow_private)
            )
        except InvalidParams as exc:
            log.warning("push to %s skipped: %s", target, exc)
            return
        tls = None
        if target.https:
            tls = self._ssl_context = self._ssl_context or ssl.create_default_context()
        problem = ""
        for attempt in range(1, self._max_attempts + 1):
            if attempt > 1:
                await asyncio.sleep(self._backoff_s * 2 ** (attempt - 2))
            try:
                async with asyncio.timeout(self._timeout_s):
                    status = await _post_pinned(target, addresses, tls, headers, body)
            except (OSError, ssl.SSLError, TimeoutError, _DeliveryError) as exc:
                problem = f"{type(exc).__name__}: {exc}"
                continue
            if 200 <= status < 300:
                return
            if status < 500:
                note = " (redirects are not followed)" if 300 <= status < 400 else ""
                log.warning("push to %s answered HTTP %d%s; not retried", target, status, note)
                return
            problem = f"HTTP {status}"
        log.warning("push to %s failed after %d attempts: %s", target, self._max_attempts, problem)
