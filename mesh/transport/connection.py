"""One paho connection's lifecycle on the asyncio loop: connect, lose, reconnect, close.

paho's socket is handed to the loop (:class:`~mesh.transport.driver.SocketDriver`) as soon as
it opens. A plain TCP connect is made on the loop (:mod:`~mesh.transport.opening`); a TLS
connect, whose handshake blocks inside paho, runs in an executor thread. After the first
successful connection, a lost one is re-established with capped, jittered exponential backoff
(:mod:`~mesh.transport.backoff`) until
:meth:`Connection.close`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
import threading
from collections.abc import Callable
from typing import Any

import paho.mqtt.client as paho
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.reasoncodes import ReasonCode

from mesh.broker import BrokerSettings
from mesh.errors import ConnectError, NotConnectedError, TransportError
from mesh.transport.backoff import Backoff
from mesh.transport.base import ConnectListener, DisconnectListener
from mesh.transport.callbacks import CallbackRunner
from mesh.transport.codec import new_properties
from mesh.transport.driver import SocketDriver
from mesh.transport.opening import open_tcp
from mesh.transport.pahoclient import FastClient
from mesh.transport.reasons import (
    ADMINISTRATIVE_ACTION,
    LostBeforeConnack,
    NoConnack,
    reason_value,
    whose_connection,
    why_lost,
)
from mesh.transport.tls import explain_connect_failure

__all__ = ["Connection"]

log = logging.getLogger(__name__)

# How long a clean close waits for the DISCONNECT to go out and for the broker to hang up.
_CLOSE_TIMEOUT_S = 2.0


class Connection:
    """The connected state of one paho client, and the listeners told when it changes."""

    def __init__(
        self,
        settings: BrokerSettings,
        client: paho.Client,
        callbacks: CallbackRunner,
        *,
        receive_maximum: int | None = None,
        client_id: str = "",
    ) -> None:
        self.settings = settings
        #: Names the component in the log lines (a process holds several connections).
        self.client_id = client_id
        #: QoS 1 messages the broker may send us unacknowledged (MQTT's Receive Maximum).
        self.receive_maximum = receive_maximum
        self.client = client
        self._callbacks = callbacks
        self.loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self._driver: SocketDriver | None = None
        #: Set once the broker accepted the connection and acknowledged its subscriptions.
        self.connected = asyncio.Event()
        #: Whether the current socket has a CONNACK (subscriptions may still await their SUBACK).
        self.session_up = False
        #: Counts CONNACKs: what ties a received message's packet id to its connection.
        self.session_number = 0
        self.closing = False
        self._started = False
        self._connack: asyncio.Future[None] | None = None
        self._disconnected: asyncio.Future[None] | None = None
        self._reconnect_task: asyncio.Task[None] | None = None
        # A duplicate of the socket paho closed after our DISCONNECT, until the broker closes too.
        self._lingering: socket.socket | None = None
        self._opened: Any = None  # the socket paho opened in the connecting thread, not yet the loop's
        self._disconnecting = False
        # paho's last error while a connect awaits its CONNACK (why a TLS connection dropped).
        self._connect_error: str | None = None
        self._connect_listeners: list[ConnectListener] = []
        self._disconnect_listeners: list[DisconnectListener] = []
        client.on_disconnect = self._threadsafe(self._on_disconnect)
        client.on_socket_open = self._on_socket_open
        client.on_socket_close = self._threadsafe(self._on_socket_close)

    async def connect(self) -> None:
        """Connect once; raise :class:`ConnectError` naming the broker and the reason."""
        self.loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._driver = driver = SocketDriver(self.client, self.loop)
        self._callbacks.on_saturation(
            lambda: driver.pause_reading("handlers"), lambda: driver.resume_reading("handlers")
        )
        self.closing = False
        try:
            await self._open(first=True)
        except LostBeforeConnack as exc:
            raise ConnectError(await self._explain(exc.detail)) from None
        except NoConnack as exc:
            raise ConnectError(await self._explain(str(exc))) from None
        except ConnectError:
            raise  # the broker answered: its CONNACK says why
        except (OSError, ssl.SSLError) as exc:
            raise ConnectError(await self._explain(exc)) from exc
        self._started = True

    async def _explain(self, error: BaseException | str | None) -> str:
        """Say why the first connect failed (probing the port takes up to a few seconds)."""
        return await self.require_loop().run_in_executor(None, explain_connect_failure, self.settings, error)

    async def close(self) -> bool:
        """Disconnect cleanly (the broker discards the will); False if already closing."""
        if self.closing:
            return False
        self.closing = True
        if self._reconnect_task is not None:
            self._reconnect_task.cancel()
        if self.client.is_connected():
            self._disconnected = asyncio.get_running_loop().create_future()
            # A component leaving on purpose ends its session now rather than after the expiry.
            disconnect_props = None
            if self.settings.session_expiry_s:
                disconnect_props = new_properties(PacketTypes.DISCONNECT)
                disconnect_props.SessionExpiryInterval = 0
            self._disconnecting = True
            try:
                self.client.disconnect(properties=disconnect_props)
                self.sync_writer()
                await asyncio.wait_for(self._disconnected, timeout=_CLOSE_TIMEOUT_S)
            except TimeoutError:
                log.warning("broker %s did not close the connection in time", self.settings.url)
            finally:
                self._disconnecting = False
        if self._lingering is not None:
            await self._linger(self._lingering)
        self._forget_socket()
        self.connected.clear()
        self.session_up = False
        return True

    async def wait_connected(self, timeout: float | None = None) -> None:
        if self.connected.is_set():
            return
        try:
            await asyncio.wait_for(self.connected.wait(), timeout)
        except TimeoutError:
            raise NotConnectedError(
                f"no connection to the MQTT broker at {self.settings.url} within {timeout:g} s"
            ) from None

    def add_connect_listener(self, listener: ConnectListener) -> None:
        self._connect_listeners.append(listener)

    def add_disconnect_listener(self, listener: DisconnectListener) -> None:
        self._disconnect_listeners.append(listener)

    def accepted(self) -> None:
        """The broker accepted the connection (CONNACK); subscriptions may still be on their way."""
        self.session_up = True
        self.session_number += 1
        if self._connack is not None and not self._connack.done():
            self._connack.set_result(None)

    def established(self, session_present: bool) -> None:
        """The broker acknowledged the session's subscriptions too: report it connected."""
        if not self.session_up or self.connected.is_set():
            return  # lost again before the last SUBACK, or already reported
        self.connected.set()
        for listener in self._connect_listeners:
            self._callbacks.run(listener, session_present)

    def _on_log(self, _client: paho.Client, _userdata: Any, level: int, text: str) -> None:
        # Set only while a connect awaits its CONNACK: paho logs every packet it handles.
        if level == paho.MQTT_LOG_ERR:
            self._connect_error = text.removeprefix("failed to receive on socket: ").split(" (_ssl.c")[0]

    def refused(self, reason: ReasonCode) -> None:
        """The broker refused the connection (CONNACK with a failure reason)."""
        if self._connack is not None and not self._connack.done():
            hint = ""
            if reason.value in (0x86, 0x87) and not self.settings.password:  # bad user name or password, not authorized
                hint = (
                    "; if the broker allows anonymous logins, it may still want a user name and password "
                    "(ejabberd does): mqtt://user:password@host:port"
                )
            user = f" of broker user {self.settings.username!r}" if self.settings.username else ""
            error = ConnectError(f"the MQTT broker at {self.settings.url} refused the connection{user}: {reason}{hint}")
            error.reason_code = reason_value(reason)
            error.hint = hint  # a generic way out: the CLI, which knows this machine's mesh up, says a better one
            error.refused_as(self.settings.url, self.settings.username)
            self._connack.set_exception(error)

    def refused_capabilities(self, error: ConnectError) -> None:
        """The broker accepted us, but cannot carry the mesh (e.g. QoS 0 only): fail the connect, hang up."""
        if self._connack is not None and not self._connack.done():
            self._connack.set_exception(error)
        log.error("%s: %s", self.client_id, error)
        self.closing = True
        self.client.disconnect()

    def require_loop(self) -> asyncio.AbstractEventLoop:
        if self.loop is None:
            raise NotConnectedError("the transport is not connected; call connect() first")
        return self.loop

    def sync_writer(self) -> None:
        """After handing paho bytes: watch the socket for room if paho could not send them all."""
        if self._driver is not None:
            self._driver.sync_writer()

    def pause_reading(self, reason: str) -> None:
        """Read nothing more until :meth:`resume_reading` (the broker holds what follows)."""
        if self._driver is not None:
            self._driver.pause_reading(reason)

    def resume_reading(self, reason: str) -> None:
        if self._driver is not None:
            self._driver.resume_reading(reason)

    def cork(self) -> None:
        """Before handing paho bytes: let this loop pass's writes leave as one segment."""
        if self._driver is not None:
            self._driver.cork()

    async def _open(self, *, first: bool) -> None:
        loop = self.require_loop()
        self._connack = connack = loop.create_future()
        connect_props = new_properties(PacketTypes.CONNECT)
        if self.settings.session_expiry_s:
            connect_props.SessionExpiryInterval = self.settings.session_expiry_s
        if self.receive_maximum is not None:
            connect_props.ReceiveMaximum = self.receive_maximum
        call: Callable[[], Any]
        if first:
            call = lambda: self.client.connect(  # noqa: E731
                self.settings.host,
                self.settings.port,
                keepalive=self.settings.keepalive_s,
                clean_start=self.settings.session_expiry_s == 0,
                properties=connect_props,
            )
        else:
            call = self.client.reconnect
        self._opened = None
        self._connect_error = None
        self.client.on_log = self._on_log
        try:
            if isinstance(self.client, FastClient) and self.settings.tls is None:
                # Plain TCP: connected on the loop; paho then only writes its CONNECT.
                self.client.preconnected = await open_tcp(
                    self.settings.host, self.settings.port, self.settings.connect_timeout_s
                )
                try:
                    call()
                finally:
                    if self.client.preconnected is not None:  # paho failed before taking it
                        self.client.preconnected.close()
                        self.client.preconnected = None
            else:
                await loop.run_in_executor(None, call)  # TLS: paho's handshake blocks
            if self._opened is not None:
                self._register_socket(self._opened)
                self._opened = None
            await asyncio.wait_for(self._connack, self.settings.connect_timeout_s)
        except TimeoutError:
            self._forget_socket()
            raise NoConnack(
                f"no CONNACK from {self.settings.url} within {self.settings.connect_timeout_s:g} s"
            ) from None
        finally:
            self.client.on_log = None
            if connack.done() and not connack.cancelled():
                connack.exception()  # seen, also when the connect call itself failed

    async def _reconnect(self) -> None:
        backoff = Backoff(self.settings.reconnect_min_delay_s, self.settings.reconnect_max_delay_s)
        while not self.closing and not self.session_up:
            await asyncio.sleep(backoff.next_delay())
            try:
                await self._open(first=False)
            except (OSError, ssl.SSLError, TransportError) as exc:
                attempts = backoff.attempt
                log.log(
                    logging.WARNING if attempts in (1, 10) or attempts % 60 == 0 else logging.DEBUG,
                    "%s: reconnect to %s failed (attempt %d): %s",
                    self.client_id,
                    self.settings.url,
                    attempts,
                    exc,
                )
            else:
                # CONNACK is in; "connected" follows once the subscriptions are acknowledged.
                log.info(
                    "%s: reconnected to %s after %d attempt(s)", self.client_id, self.settings.url, backoff.attempt
                )
                return

    def _on_disconnect(
        self, _client: paho.Client, _userdata: Any, _flags: Any, reason: ReasonCode, _props: Properties | None
    ) -> None:
        was_connected = self.connected.is_set()
        if not self.session_up and self._connack is not None and not self._connack.done():
            # Dropped before the CONNACK (a TLS alert, plain MQTT sent to a TLS port): fail now, not at the timeout.
            self._connack.set_exception(LostBeforeConnack(self.settings.url, self._connect_error))
        self.connected.clear()
        self.session_up = False
        self._forget_socket()
        if self._disconnected is not None and not self._disconnected.done():
            self._disconnected.set_result(None)
        if self.closing or not self._started:
            return
        if was_connected:
            # Whose connection, and why: a takeover (another connection with this client id, a
            # second instance or someone holding the component's credentials) must be told apart.
            code = reason_value(reason)
            if code == ADMINISTRATIVE_ACTION:
                # Mosquitto's dynamic-security plugin closes the connections of a user whose rights it
                # changed (another `mesh run` beside `mesh up` enrolling a namespace adds to the CLI's):
                # routine, and the reconnect gets the new rules.
                log.info(
                    "%s: reconnecting to %s after the broker changed its rules (Administrative action, reason code "
                    "0x%02X, broker user %s)",
                    self.client_id,
                    self.settings.url,
                    code,
                    self.settings.username or "anonymous",
                )
            else:
                log.warning(
                    "%s: connection to %s lost (%s, reason code 0x%02X, broker user %s%s); reconnecting",
                    self.client_id,
                    self.settings.url,
                    why_lost(reason),
                    code,
                    self.settings.username or "anonymous",
                    whose_connection(code),
                )
            for listener in self._disconnect_listeners:
                self._callbacks.run(listener, str(reason))
        if self._reconnect_task is None or self._reconnect_task.done():
            self._reconnect_task = self.require_loop().create_task(self._reconnect())

    def _on_socket_open(self, _client: paho.Client, _userdata: Any, sock: Any) -> None:
        # Runs in the thread that connects (an executor thread for TLS), which then still writes the CONNECT: the
        # loop takes the socket over only once that thread is done with it (_open). A TLS
        # socket read on the loop while another thread writes to it corrupts its state
        # ("[SSL: BAD_LENGTH]": the connection drops, its SUBACK or CONNACK never seen).
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._opened = sock

    def _register_socket(self, sock: Any) -> None:
        if self.client.socket() is not sock:
            return  # closed again before the loop got to it
        if self.closing:
            self.client.disconnect()  # a reconnect finished after close(): undo it
            return
        if self._driver is None:
            raise NotConnectedError("the transport is not connected; call connect() first")
        self._driver.attach(sock)

    def _on_socket_close(self, _client: paho.Client, _userdata: Any, sock: Any) -> None:
        if self._driver is not None and sock is self._driver.sock:
            self._driver.detach()
        if self._disconnecting and self._lingering is None:
            # paho closes the socket right after writing DISCONNECT. Closed with bytes unread
            # (a message on its way to us), Linux sends RST, and a broker that sees the reset
            # before reading the DISCONNECT publishes the will. A duplicate descriptor keeps
            # the connection open so that _linger can end it with FIN instead.
            with contextlib.suppress(OSError):
                self._lingering = socket.fromfd(sock.fileno(), sock.family, sock.type)

    async def _linger(self, sock: socket.socket) -> None:
        """Half-close after DISCONNECT and read until the broker closes too: no RST."""
        self._lingering = None
        loop = self.require_loop()
        try:
            sock.setblocking(False)
            sock.shutdown(socket.SHUT_WR)
            async with asyncio.timeout(_CLOSE_TIMEOUT_S):
                while await loop.sock_recv(sock, 65536):
                    pass  # what the broker sent before it read our DISCONNECT
        except (OSError, TimeoutError) as exc:
            log.debug("closing the connection to %s: %s", self.settings.url, exc)
        finally:
            sock.close()

    def _forget_socket(self) -> None:
        if self._driver is not None:
            self._driver.detach()

    def _threadsafe(self, callback: Callable[..., None]) -> Callable[..., None]:
        """Run a paho callback on the loop even when paho calls it from the connect thread."""

        def wrapper(*args: Any) -> None:
            if self.loop is None or threading.get_ident() == self._loop_thread:
                callback(*args)
            else:
                self.loop.call_soon_threadsafe(callback, *args)

        return wrapper
