"""One discovery registry per process, shared by its components and started on first need.

DESIGN, "Discovery and presence": discovery costs O(changes), not O(agents x watchers). Every
component that needs to know who is on the mesh (a delegating agent, the orchestrator, a
gateway, the CLI) leases the process's :class:`~mesh.discovery.registry.DiscoveryRegistry` of its broker
and namespace from :func:`lease_registry`: the first lease opens one connection of its own (no
will, session ended with the connection: it owns no card and needs no queue) with one
subscription to ``{ns}/a2a/v1/discovery/#``; the others share it; the last release closes it.
A component that never needs discovery (an echo agent) runs no registry at all.

Components that were given a transport rather than a broker (tests, the in-memory harness),
and components with a broker password of their own (whose users the generated rules bind to one
client id each, :mod:`mesh.clientids`), get a registry of their own on their transport:
:class:`LazyRegistry` hides the difference.

Shared registries are kept per event loop, keyed by the broker URL, the namespace and the
trusted keys (components with different trust stores must not share what they accept).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import uuid
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mesh.broker import BrokerSettings
from mesh.discovery.registry import DiscoveryRegistry, InstanceListener, Listener, RefusalListener
from mesh.transport import MqttTransport, Transport

if TYPE_CHECKING:
    from mesh.trust import CardVerifier

__all__ = ["LazyRegistry", "RegistryLease", "lease_registry", "shared_registry_count"]

log = logging.getLogger(__name__)

_Key = tuple[str, str, tuple[str, ...] | None]


def _trust_key(verifier: CardVerifier | None) -> tuple[str, ...] | None:
    """What a registry trusts: a live store by its file (whose keys change), a fixed one by its
    keys' thumbprints. Equal trust shares a registry."""
    if verifier is None:
        return None
    if verifier.live and verifier.keys.path is not None:
        return ("file", str(verifier.keys.path.resolve()))
    return tuple(sorted(key.thumbprint() for key in verifier.keys.keys))


@dataclass(slots=True)
class _Shared:
    registry: DiscoveryRegistry
    transport: Transport
    started: asyncio.Future[None]
    leases: int = 0


_pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[_Key, _Shared]] = weakref.WeakKeyDictionary()


def _pool() -> dict[_Key, _Shared]:
    return _pools.setdefault(asyncio.get_running_loop(), {})


def shared_registry_count() -> int:
    """How many shared registries this event loop runs (one per broker and namespace in use)."""
    return len(_pool())


class RegistryLease:
    """A component's hold on a shared registry; :meth:`release` it when the component stops."""

    def __init__(self, key: _Key, shared: _Shared) -> None:
        self._key = key
        self._shared: _Shared | None = shared
        self.registry = shared.registry
        self._listeners: list[Listener] = []
        self._instance_listeners: list[InstanceListener] = []
        self._refusal_listeners: list[RefusalListener] = []

    def add_refusal_listener(self, listener: RefusalListener) -> None:
        """Follow the cards the registry refuses until the lease is released."""
        self._refusal_listeners.append(listener)
        self.registry.add_refusal_listener(listener)

    def add_listener(self, listener: Listener) -> None:
        """Follow the registry's events until the lease is released."""
        self._listeners.append(listener)
        self.registry.add_listener(listener)

    def add_instance_listener(self, listener: InstanceListener) -> None:
        """Follow replicas coming and going until the lease is released."""
        self._instance_listeners.append(listener)
        self.registry.add_instance_listener(listener)

    async def release(self) -> None:
        shared, self._shared = self._shared, None
        if shared is None:
            return
        for listener in self._listeners:
            self.registry.remove_listener(listener)
        for instance_listener in self._instance_listeners:
            self.registry.remove_instance_listener(instance_listener)
        for refusal_listener in self._refusal_listeners:
            self.registry.remove_refusal_listener(refusal_listener)
        shared.leases -= 1
        if shared.leases > 0:
            return
        pool = _pool()
        if pool.get(self._key) is shared:
            del pool[self._key]
        await shared.registry.stop()
        await shared.transport.close()


async def lease_registry(
    broker: BrokerSettings,
    namespace: str,
    *,
    owner: str,
    ttl_s: float = 60.0,
    verifier: CardVerifier | None = None,
) -> RegistryLease:
    """The process's registry of ``namespace`` on ``broker``, started (retained cards flowing).

    ``owner`` names the component in the connection's client id when it is the first;
    ``verifier`` checks card signatures (a trust store).
    """
    # Not keyed by user: every component may read the discovery tree, so the first one's
    # identity serves all (with a user per component, one registry still serves the process).
    key: _Key = (broker.url, namespace, _trust_key(verifier))
    pool = _pool()
    shared = pool.get(key)
    if shared is None:
        # The registry's connection keeps no session: it subscribes afresh on every connect,
        # and the broker sends the retained cards again.
        settings = dataclasses.replace(broker, session_expiry_s=0)
        transport = MqttTransport(settings, client_id=f"{namespace}/{owner}-discovery-{uuid.uuid4().hex[:8]}")
        registry = DiscoveryRegistry(transport, namespace, ttl_s=ttl_s, verifier=verifier)
        shared = _Shared(registry, transport, asyncio.ensure_future(_start(transport, registry)))
        pool[key] = shared
    shared.leases += 1
    try:
        await asyncio.shield(shared.started)
    except BaseException:
        shared.leases -= 1
        if shared.leases == 0 and pool.get(key) is shared:
            del pool[key]
            await shared.transport.close()
        raise
    return RegistryLease(key, shared)


async def _start(transport: Transport, registry: DiscoveryRegistry) -> None:
    await transport.connect()
    await registry.start()


class LazyRegistry:
    """A component's access to discovery, started on first need.

    With ``broker`` it leases the process's shared registry; with only ``transport`` it runs a
    registry of its own on that transport (which must be connected by then).
    """

    def __init__(
        self,
        namespace: str,
        *,
        owner: str,
        broker: BrokerSettings | None = None,
        transport: Transport | None = None,
        ttl_s: float = 60.0,
        verifier: CardVerifier | None = None,
    ) -> None:
        if broker is None and transport is None:
            raise TypeError("LazyRegistry needs a broker or a transport")
        self.namespace = namespace
        self.owner = owner
        self._broker = broker
        self._transport = transport
        self._ttl_s = ttl_s
        self._verifier = verifier
        self._listeners: list[Listener] = []
        self._instance_listeners: list[InstanceListener] = []
        self._starting: asyncio.Future[DiscoveryRegistry] | None = None
        self._lease: RegistryLease | None = None
        self._own: DiscoveryRegistry | None = None
        #: The registry once started; ``None`` before.
        self.current: DiscoveryRegistry | None = None

    def add_listener(self, listener: Listener) -> None:
        """Follow the registry's events from its start on (e.g. the call path's "agent gone")."""
        self._listeners.append(listener)
        if self._lease is not None:
            self._lease.add_listener(listener)
        elif self.current is not None:
            self.current.add_listener(listener)

    def add_instance_listener(self, listener: InstanceListener) -> None:
        """Follow replicas coming and going from the registry's start on."""
        self._instance_listeners.append(listener)
        if self._lease is not None:
            self._lease.add_instance_listener(listener)
        elif self.current is not None:
            self.current.add_instance_listener(listener)

    async def get(self) -> DiscoveryRegistry:
        """The registry, started now if it was not."""
        if self.current is not None:
            return self.current
        if self._starting is None:
            self._starting = asyncio.ensure_future(self._start())
        try:
            return await asyncio.shield(self._starting)
        except BaseException:
            if self._starting.done():
                self._starting = None
            raise

    async def _start(self) -> DiscoveryRegistry:
        if self._broker is not None:
            lease = await lease_registry(
                self._broker, self.namespace, owner=self.owner, ttl_s=self._ttl_s, verifier=self._verifier
            )
            for listener in self._listeners:
                lease.add_listener(listener)
            for instance_listener in self._instance_listeners:
                lease.add_instance_listener(instance_listener)
            self._lease, self.current = lease, lease.registry
            return lease.registry
        if self._transport is None:
            raise RuntimeError("discovery is not started: call start() first")
        registry = DiscoveryRegistry(self._transport, self.namespace, ttl_s=self._ttl_s, verifier=self._verifier)
        for listener in self._listeners:
            registry.add_listener(listener)
        for instance_listener in self._instance_listeners:
            registry.add_instance_listener(instance_listener)
        await registry.start()
        self._own = self.current = registry
        return registry

    async def close(self) -> None:
        starting, self._starting = self._starting, None
        if starting is not None and not starting.done():
            starting.cancel()
        lease, own = self._lease, self._own
        self._lease = self._own = self.current = None
        if lease is not None:
            await lease.release()
        if own is not None:
            await own.stop()
