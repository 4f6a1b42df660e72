"""Test hosts as network namespaces on this machine (DESIGN, "Tests"): a LAN of the test's own.

:func:`make_lan` builds a switch (a bridge in a namespace of its own, so no firewall rule of
this machine applies to it), plugs this machine's own namespace into it (``.1``: where the
test process and its PostgreSQL are reached) and then one namespace per host, each on a veth
pair with an address on a private /24. :meth:`Lan.cut` and :meth:`Lan.heal` take a host's cable
out and put it back; :meth:`Host.spawn` starts a process on a host, :meth:`Host.kill_all` kills
every process of it. Everything is removed when the test ends, passed or failed: the processes,
the namespaces (their veth ends with them), this machine's end of the cable.

Needs root and iproute2's ``ip``; :func:`netns_available` says why not, for a skip.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import random
import shutil
import signal
import subprocess
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field

__all__ = ["Host", "Lan", "make_lan", "netns_available"]


def netns_available() -> str | None:
    """None when test hosts can be made here, else why not."""
    if os.geteuid() != 0:
        return "needs root to make network namespaces (ip netns)"
    if shutil.which("ip") is None:
        return "needs iproute2's ip command (.ci/setup installs it)"
    probe = f"mesh-probe-{uuid.uuid4().hex[:6]}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True, check=False)
    if made.returncode != 0:
        return f"cannot make a network namespace here: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True, check=False)
    return None


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")


@dataclass
class Host:
    """One test host: a network namespace with one address on the LAN."""

    name: str
    netns: str
    address: str
    cable: str  # its veth end in the switch
    procs: list[asyncio.subprocess.Process] = field(default_factory=list)

    async def spawn(self, *argv: str, env: dict[str, str] | None = None) -> asyncio.subprocess.Process:
        """Start ``argv`` on this host (stdout and stderr piped)."""
        proc = await asyncio.create_subprocess_exec(
            "ip",
            "netns",
            "exec",
            self.netns,
            *argv,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
        )
        self.procs.append(proc)
        return proc

    def pids(self) -> list[int]:
        done = subprocess.run(["ip", "netns", "pids", self.netns], capture_output=True, text=True, check=False)
        return [int(p) for p in done.stdout.split()]

    def kill_all(self) -> None:
        """kill -9 every process on this host (the host dies)."""
        for pid in self.pids():
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@dataclass
class Lan:
    """The switch, this machine's address on it, and the hosts."""

    tag: str
    switch: str
    network: ipaddress.IPv4Network
    local_address: str
    local_cable: str
    hosts: dict[str, Host] = field(default_factory=dict)

    def add(self, name: str) -> Host:
        index = len(self.hosts) + 10
        netns = f"mesh-{self.tag}-{name}"
        cable, inside = f"mc{self.tag}{index}", f"mh{self.tag}{index}"
        address = str(self.network.network_address + index)
        _ip("netns", "add", netns)
        host = Host(name, netns, address, cable)
        self.hosts[name] = host
        _ip("link", "add", inside, "netns", netns, "type", "veth", "peer", "name", cable, "netns", self.switch)
        _ip("-n", self.switch, "link", "set", cable, "master", "br0", "up")
        _ip("-n", netns, "addr", "add", f"{address}/{self.network.prefixlen}", "dev", inside)
        _ip("-n", netns, "link", "set", inside, "up")
        _ip("-n", netns, "link", "set", "lo", "up")
        return host

    def cut(self, host: Host) -> None:
        """Pull the host's cable: nothing reaches it, nothing leaves it (a partition)."""
        _ip("-n", self.switch, "link", "set", host.cable, "down")

    def heal(self, host: Host) -> None:
        _ip("-n", self.switch, "link", "set", host.cable, "up")

    async def remove(self) -> None:
        for host in self.hosts.values():
            host.kill_all()
            for proc in host.procs:
                if proc.returncode is None:
                    with suppress(ProcessLookupError):
                        proc.kill()
                await proc.wait()
            subprocess.run(["ip", "netns", "del", host.netns], capture_output=True, check=False)
        subprocess.run(["ip", "link", "del", self.local_cable], capture_output=True, check=False)
        subprocess.run(["ip", "netns", "del", self.switch], capture_output=True, check=False)


def _free_network() -> ipaddress.IPv4Network:
    """A /24 of 10.0.0.0/8 that no interface of this machine uses (other test runs included)."""
    used = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True, check=False).stdout
    while True:
        second, third = random.randint(128, 254), random.randint(0, 254)
        if f" 10.{second}.{third}." not in used:
            return ipaddress.IPv4Network(f"10.{second}.{third}.0/24")


@asynccontextmanager
async def make_lan() -> AsyncIterator[Lan]:
    """A LAN of test hosts, removed at the end whatever happens (see the module doc)."""
    tag = uuid.uuid4().hex[:6]
    switch, network = f"mesh-{tag}-switch", _free_network()
    local_address = str(network.network_address + 1)
    lan = Lan(tag, switch, network, local_address, f"ml{tag}")
    try:
        _ip("netns", "add", switch)
        _ip("-n", switch, "link", "add", "br0", "type", "bridge")
        _ip("-n", switch, "link", "set", "br0", "up")
        _ip("link", "add", lan.local_cable, "type", "veth", "peer", "name", "up0", "netns", switch)
        _ip("-n", switch, "link", "set", "up0", "master", "br0", "up")
        _ip("addr", "add", f"{local_address}/{network.prefixlen}", "dev", lan.local_cable)
        _ip("link", "set", lan.local_cable, "up")
        yield lan
    finally:
        await lan.remove()
