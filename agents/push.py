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

The configs are kept by :mod:`agents.pushconfigs`, the URL checks are :mod:`agents.pushurls`;
their names are re-exported here.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import re
import ssl
from collections import deque
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType

from agents.pushconfigs import MAX_CONFIGS_PER_TASK, PushConfigStore
from agents.pushurls import (
    PushTarget,
    check_push_url,
    non_public_reason,
    parse_push_url,
    resolve_push_target,
    validate_push_url,
)
from mesh.a2a import InvalidParams, PushNotificationConfig, Task
from mesh.profile.v1 import push_payload_v1

__all__ = [
    "MAX_CONFIGS_PER_TASK",
    "PushConfigStore",
    "PushNotifier",
    "check_push_url",
    "non_public_reason",
    "validate_push_url",
]

log = logging.getLogger(__name__)


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
    target: PushTarget,
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
_Notification = tuple[dict[str, bytes], list[tuple[PushTarget, dict[str, str], str]]]


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
                endpoints.append((parse_push_url(config.url), _headers(config), _version(config)))
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

    async def _deliver(self, target: PushTarget, headers: dict[str, str], body: bytes) -> None:
        try:
            # Its own threads: getaddrinfo blocks, and slow resolvers must not hold the default pool.
            addresses = await asyncio.get_running_loop().run_in_executor(
                self._resolving_threads(),
                functools.partial(resolve_push_target, target, allow_private=self._allow_private),
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
