"""What ``mesh up`` checks and chooses before it starts its components: free gateway ports, and
a broker that relays a request in about a millisecond (:mod:`mesh.brokertools.brokerprobe`)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence

from mesh.broker import BrokerSettings
from mesh.brokertools.brokerprobe import SLOW_ROUND_TRIP_MS, round_trip_ms
from mesh.brokertools.localbroker import (
    BrokerUnavailableError,
    LocalBroker,
    RunningBroker,
    default_config_path,
    free_port,
    persistence_config,
    port_answers,
    port_is_free,
    running_broker,
)
from mesh.brokertools.upstate import UpClaim, UpRecord, suggested_http_port
from mesh.config import MeshConfig
from mesh.config.errors import config_error, key_path
from mesh.errors import ConnectError, MeshError
from mesh.redaction import redact_url

log = logging.getLogger(__name__)

LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
HTTP_PORT_ENV = "MESH_HTTP_PORT"  # the port of `mesh up`'s gateway (gateways/http/mesh-up.yaml)


@dataclasses.dataclass(frozen=True, slots=True)
class UpBroker:
    """The broker ``mesh up`` runs on, and why, for its banner."""

    settings: BrokerSettings
    how: str | None = None  # None: a broker that was already running, used as is
    pid: int | None = None  # of the Mosquitto started here

    def record(self, namespace: str, gateways: Sequence[str] = ()) -> UpRecord:
        """What the state file says while ``mesh up`` runs on this broker."""
        return UpRecord(os.getpid(), namespace, self.settings.url, self.pid, list(gateways))


def check_gateway_ports(configs: Sequence[MeshConfig]) -> None:
    """Refuse, before anything starts, a gateway port something else listens on."""
    for config in configs:
        for index, entry in enumerate(config.sections.get("gateways") or []):
            if not isinstance(entry, Mapping):
                continue  # the section's own checks report it
            host, port = str(entry.get("host", "127.0.0.1")), str(entry.get("port", ""))
            if port.isdigit() and int(port) and not port_is_free(host, int(port)):
                raise config_error(
                    config.source,
                    key_path("gateways", index, "port"),
                    f"port {port} on {host} is already in use (another mesh up or mesh run?)",
                    "stop what listens there, or choose a free port (for mesh up's gateway: "
                    f"{HTTP_PORT_ENV}={suggested_http_port()} mesh up)",
                )


@contextlib.asynccontextmanager
async def broker_for_up(settings: BrokerSettings, claim: UpClaim) -> AsyncIterator[UpBroker]:
    """The broker at ``settings`` if it answers and is fast; else one started here, stopped on exit.

    A slow broker elsewhere is used with a warning: ``mesh up`` starts brokers on this machine only.
    """
    reason = None
    port = settings.port
    if await asyncio.to_thread(port_answers, settings.host, settings.port):
        slow_ms = await _slow_round_trip(settings)
        if slow_ms is None:
            yield _recorded(UpBroker(settings), claim)
            return
        why = f"{redact_url(settings.url)} took {slow_ms:.0f} ms per request/answer round trip (~1 ms expected)"
        fix = (
            "a Mosquitto without `set_tcp_nodelay true` is that slow: add the line to its config (Debian's "
            "service: /etc/mosquitto/mosquitto.conf), then restart it (sudo systemctl restart mosquitto)"
        )
        if settings.host not in LOCAL_HOSTS:
            log.warning("the broker at %s; %s", why, fix)
            yield _recorded(UpBroker(settings, f"slow: {slow_ms:.0f} ms per round trip"), claim)
            return
        beside = settings.port + 1  # 1884 beside the stock service's 1883: easy to remember
        port = beside if beside <= 65535 and not port_answers("127.0.0.1", beside) else free_port()
        log.warning(
            "the broker at %s; mesh up starts its own from mosquitto.conf on port %d instead. %s", why, port, fix
        )
        reason = f"{redact_url(settings.url)} is slow: {slow_ms:.0f} ms per round trip, no set_tcp_nodelay?"
    elif settings.host not in LOCAL_HOSTS:
        raise ConnectError(
            f"no MQTT broker answers at {settings.url}, and mesh up only starts one on this machine; "
            "start that broker, or pass --broker mqtt://localhost:1883"
        )
    else:
        log.info("no broker answers at %s; starting Mosquitto from mosquitto.conf", settings.url)
    # Another process may take the port beside between the look and the start: then any free one.
    with _started_broker(port, claim, elsewhere_if_taken=reason is not None) as broker:
        log_file = getattr(broker, "log_file", None)
        how = "started here from mosquitto.conf, " + (f"log {log_file}" if log_file else "in a container")
        if reason is not None:  # our own broker, on another port than the slow one's
            settings = dataclasses.replace(settings, host=broker.host, port=broker.port)
        how = f"{how}; {reason}" if reason else how
        yield _recorded(UpBroker(settings, how, getattr(broker, "pid", None)), claim)


def _recorded(broker: UpBroker, claim: UpClaim) -> UpBroker:
    claim.write(broker.record(claim.namespace))  # before anything else: the next start cleans after a crash
    return broker


async def _slow_round_trip(settings: BrokerSettings) -> float | None:
    """The round trip in ms if the broker is slow, None if fast or if it cannot be measured."""
    try:
        measured = await round_trip_ms(settings)
    except (MeshError, TimeoutError) as exc:
        log.warning("could not measure the round trip through %s (%s); using it as it is", settings.url, exc)
        return None
    log.info("request/answer round trip through %s: %.2f ms", settings.url, measured)
    return measured if measured > SLOW_ROUND_TRIP_MS else None


@contextlib.contextmanager
def _started_broker(port: int, claim: UpClaim, *, elsewhere_if_taken: bool = False) -> Iterator[RunningBroker]:
    """Mosquitto on ``port`` (or, ``elsewhere_if_taken``, on a free port if it fails there), its
    files in ``claim``'s broker directory, dying with this process.

    Started from this (the main) thread: the kernel stops the broker when the starting thread dies.
    """
    try:
        broker = _local_broker(port, claim)
    except BrokerUnavailableError:  # no binary here: a container, if a Docker engine answers
        with running_broker(prefer="container", port=port) as contained:
            yield contained
        return
    try:
        try:
            broker.start()
        except BrokerUnavailableError:
            if not elsewhere_if_taken:
                raise
            broker.stop()  # its directory (and the broker's state on disk) is the next one's
            taken, broker = port, _local_broker(free_port(), claim)
            # Started again, a failure for another reason raises with the broker's log.
            log.warning(
                "the broker could not listen on port %d (taken meanwhile?); starting it on port %d instead",
                taken,
                broker.port,
            )
            broker.start()
        yield broker
    finally:
        broker.remove()


def _local_broker(port: int, claim: UpClaim) -> LocalBroker:
    # Its state on disk: whoever reconnects first after the broker restarts finds its session.
    return LocalBroker(
        default_config_path(),
        port=port,
        workdir=claim.files.broker_dir,
        die_with_parent=True,
        extra_config=persistence_config(claim.files.broker_dir / "store"),
    )
