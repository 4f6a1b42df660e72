"""What ``mesh doctor``'s checks share: a :class:`Finding`, the :class:`Probe` whose connections
they use, and a child process that connects and dies without DISCONNECT (wills, sessions).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import sys
import textwrap
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from mesh.broker import BrokerSettings
from mesh.brokertools.brokerrules import PROBE_ROOT
from mesh.clientids import Claimed, client_transport, connection_for
from mesh.errors import MeshError
from mesh.transport import InboundMessage, MqttTransport

__all__ = ["PROBE_GROUP", "WAIT_S", "Check", "Finding", "Probe", "nothing", "received", "run_child"]

#: The share group of the ``$share`` check.
PROBE_GROUP = "doctor"
#: How long a check waits for a message the broker should deliver.
WAIT_S = 3.0


@dataclass(frozen=True, slots=True)
class Finding:
    check: str
    ok: bool
    seen: str
    consequence: str = ""  # what a failure means for the mesh
    needed: bool = False  # the mesh cannot run without it

    def line(self) -> str:
        mark = "pass" if self.ok else ("FAIL" if self.needed else "warn")
        text = f"{mark}  {self.check:<44} {self.seen}"
        return text if self.ok or not self.consequence else f"{text}: {self.consequence}"


Check = Callable[[], Awaitable[Finding]]


class Probe:
    """Connections of one diagnosis, on a root topic of its own; all closed at the end.

    Under rules that bind the doctor's user to its client ids (a secured ``mesh up``), each
    connection, a child process's included, takes a slot of that user (mesh.clientids)."""

    def __init__(self, settings: BrokerSettings) -> None:
        self.settings = dataclasses.replace(settings, session_expiry_s=0)
        self.root = f"{PROBE_ROOT}/{uuid.uuid4().hex[:12]}"
        self._open: list[MqttTransport] = []

    def claim(self, prefix: str) -> Claimed:
        """A user and client id for a connection this process opens itself (a random id where
        there are no slots), held until released."""
        otherwise = f"{prefix}-{uuid.uuid4().hex[:8]}"
        name = self.settings.username or ""
        return connection_for(self.settings, "client", "", name, otherwise)

    async def connect(self, settings: BrokerSettings | None = None, **options: object) -> MqttTransport:
        settings = settings or self.settings
        if "client_id" in options:
            transport = MqttTransport(settings, **options)  # type: ignore[arg-type]
        else:  # a slot of the user where the rules bind its client ids (mesh.clientids)
            transport = client_transport(settings, **options)
        await transport.connect()
        self._open.append(transport)
        return transport

    async def close(self) -> None:
        for transport in self._open:
            with contextlib.suppress(MeshError):
                await transport.close()


async def received(
    transport: MqttTransport, topic_filter: str, send: Callable[[], Awaitable[None]], **subscribe: bool
) -> InboundMessage | None:
    """Subscribe, run ``send``, and return the first message (``None`` after :data:`WAIT_S`)."""
    got: asyncio.Queue[InboundMessage] = asyncio.Queue()
    await transport.subscribe(topic_filter, got.put_nowait, **subscribe)
    await send()
    try:
        return await asyncio.wait_for(got.get(), WAIT_S)
    except TimeoutError:
        return None


def child_script(settings: BrokerSettings, client_id: str, subscribe: str | None, will_topic: str | None) -> str:
    """The child's program: the broker's address and TLS files (paths, not secrets) written in."""
    tls = settings.tls
    tls_options = None if tls is None else (tls.ca_file, tls.cert_file, tls.key_file, tls.insecure)
    return textwrap.dedent(
        f"""
        import asyncio, os
        from mesh.broker import BrokerSettings, TlsOptions
        from mesh.transport import MqttTransport, Will
        async def main():
            will = None if {will_topic!r} is None else Will(topic={will_topic!r}, payload=b"gone", qos=1)
            credentials = dict(username=os.environ.get("MESH_DOCTOR_USER"), password=os.environ.get("MESH_DOCTOR_PW"))
            tls = None if {tls_options!r} is None else TlsOptions(*{tls_options!r})
            settings = BrokerSettings(
                host={settings.host!r}, port={settings.port!r}, tls=tls, **{{k: v for k, v in credentials.items() if v}}
            )
            transport = MqttTransport(settings, client_id={client_id!r}, will=will)
            await transport.connect()
            if {subscribe!r} is not None:
                await transport.subscribe({subscribe!r}, lambda message: None)
            os._exit(0)  # no DISCONNECT: the broker sees the connection die
        asyncio.run(main())
        """
    )


async def run_child(claimed: Claimed, *, subscribe: str | None = None, will: str | None = None) -> None:
    """Run a child that connects as ``claimed`` (its slot held here meanwhile) and dies without DISCONNECT."""
    settings = claimed.settings
    # The credentials go by environment, not on the command line (where `ps` would show them).
    credentials = {"MESH_DOCTOR_USER": settings.username or "", "MESH_DOCTOR_PW": settings.password or ""}
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        child_script(settings, claimed.client_id, subscribe, will),
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, **credentials},
    )
    _, err = await asyncio.wait_for(child.communicate(), 30)
    if child.returncode != 0:
        raise RuntimeError(err.decode(errors="replace").strip().splitlines()[-1] if err else "child failed")


async def nothing() -> None:
    """Send nothing: the message looked for is already on the broker."""
