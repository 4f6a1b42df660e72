"""A real ejabberd cluster on loopback for the cross-node tests (DESIGN, "Tests").

ejabberd (Debian's package, installed by ``.ci/setup``) is a second MQTT v5 broker that
clusters: each node is an Erlang VM started here with its own node name, cookie, Mnesia
directory and MQTT port, the second joining the first (``join_cluster``). Nodes are stopped by
their PID. Its MQTT module refuses an empty password even for anonymous logins, so the URLs
carry ``mesh:mesh``.
"""

from __future__ import annotations

import contextlib
import glob
import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from mesh.brokertools.localbroker import free_port, port_answers

__all__ = ["EjabberdCluster", "EjabberdNode", "ejabberd_available"]

_CONFIG = """\
hosts: ["localhost"]
loglevel: warning
log_rotate_count: 0
auth_method: [anonymous]
anonymous_protocol: login_anon
allow_multiple_connections: true
listen:
  -
    port: {port}
    ip: "127.0.0.1"
    module: mod_mqtt
    backlog: 1000
acl:
  local:
    user_regexp: ""
access_rules:
  local:
    allow: all
modules:
  mod_mqtt:
    max_queue: 100000
    session_expiry: 1h
"""


def _ejabberd_libs() -> str | None:
    """The directory holding ejabberd's Erlang application (its ERL_LIBS), if installed."""
    found = glob.glob("/usr/lib/*/ejabberd-*/ebin/ejabberd.app")
    return str(Path(found[0]).parents[2]) if found else None


def _accepts_mqtt(port: int) -> bool:
    """Whether an MQTT v5 CONNECT (user and password, clean start) on ``port`` gets a CONNACK."""
    client_id, user = b"probe-" + secrets.token_hex(4).encode(), b"mesh"
    body = b"\x00\x04MQTT\x05\xc2\x00\x3c\x00"  # v5, user + password + clean start, keepalive 60
    for field_ in (client_id, user, user):
        body += len(field_).to_bytes(2, "big") + field_
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
            sock.sendall(b"\x10" + bytes([len(body)]) + body)
            return sock.recv(1) == b"\x20"
    except OSError:
        return False


def ejabberd_available() -> bool:
    return shutil.which("erl") is not None and _ejabberd_libs() is not None


@dataclass
class EjabberdNode:
    name: str
    port: int
    directory: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"mqtt://mesh:mesh@127.0.0.1:{self.port}"

    @property
    def erlang_node(self) -> str:
        return f"{self.name}@{socket.gethostname().split('.')[0]}"


@dataclass
class EjabberdCluster:
    """``nodes`` ejabberd nodes joined in one cluster; :meth:`start` and :meth:`stop`."""

    base: Path
    size: int = 2
    cookie: str = field(default_factory=lambda: secrets.token_hex(8))
    nodes: list[EjabberdNode] = field(default_factory=list)

    def start(self, timeout: float = 30.0) -> None:
        prefix = f"m{secrets.token_hex(4)}"
        # One name server before the nodes: two VMs starting together each start their own, and
        # a node could come up unreachable by name ("nodedown" at join_cluster).
        subprocess.run(["epmd", "-daemon"], check=False, timeout=10)
        for index in range(1, self.size + 1):
            directory = self.base / f"node{index}"
            directory.mkdir(parents=True)
            node = EjabberdNode(f"{prefix}n{index}", free_port(), directory)
            (directory / "ejabberd.yml").write_text(_CONFIG.format(port=node.port))
            with (directory / "out.log").open("wb") as out:  # the child keeps its own descriptor
                node.process = self._spawn(node, out)
            self.nodes.append(node)
        deadline = time.monotonic() + timeout
        for node in self.nodes:
            while not port_answers("127.0.0.1", node.port):
                if (node.process is not None and node.process.poll() is not None) or time.monotonic() > deadline:
                    raise RuntimeError(f"ejabberd node {node.name} did not start:\n{self.log(node)}")
                time.sleep(0.1)
        # Listening on MQTT is not yet answering by name: wait until each node takes a command.
        for node in self.nodes:
            while not self._answers(node):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"ejabberd node {node.erlang_node} did not answer by name:\n{self.log(node)}")
                time.sleep(0.2)
        first = self.nodes[0]
        for node in self.nodes[1:]:
            self.ctl(node, "join_cluster", first.erlang_node)
        # Joining restarts the node's applications: wait until each accepts an MQTT session again.
        for node in self.nodes:
            while not _accepts_mqtt(node.port):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"ejabberd node {node.name} did not come back:\n{self.log(node)}")
                time.sleep(0.1)
        members = self.ctl(first, "list_cluster").split()
        if sorted(members) != sorted(n.erlang_node for n in self.nodes):
            raise RuntimeError(f"the cluster has {members}, expected every node")

    def _spawn(self, node: EjabberdNode, out: IO[bytes]) -> subprocess.Popen[bytes]:
        directory = node.directory
        return subprocess.Popen(
            ["erl", "-sname", node.name, "-setcookie", self.cookie, "-noinput",
             "-mnesia", "dir", f'"{directory / "spool"}"', "-s", "ejabberd"],
            cwd=directory,
            env=self._env(directory),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip

    def _answers(self, node: EjabberdNode) -> bool:
        try:
            self.ctl(node, "status")
        except RuntimeError:
            return False
        return True

    def ctl(self, node: EjabberdNode, *command: str) -> str:
        """An ``ejabberdctl`` command run against ``node`` (without the Debian wrapper's user switch)."""
        done = subprocess.run(
            ["erl", "-sname", f"ctl{secrets.token_hex(4)}", "-setcookie", self.cookie, "-noinput", "-hidden",
             "-s", "ejabberd_ctl", "-extra", node.erlang_node, *command],
            env=self._env(node.directory),
            capture_output=True,
            timeout=60,
            check=False,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"ejabberdctl {' '.join(command)} failed ({done.returncode}): {done.stdout!r}")
        return done.stdout.decode()

    def stop(self) -> None:
        for node in self.nodes:
            if node.process is None or node.process.poll() is not None:
                continue
            with contextlib.suppress(ProcessLookupError):
                os.killpg(node.process.pid, signal.SIGKILL)  # the VM and whatever it started
            node.process.wait(timeout=10)

    def log(self, node: EjabberdNode) -> str:
        return "".join(p.read_text(errors="replace")[-3000:] for p in node.directory.glob("*.log") if p.is_file())

    @staticmethod
    def _env(directory: Path) -> dict[str, str]:
        return {
            **os.environ,
            "EJABBERD_CONFIG_PATH": str(directory / "ejabberd.yml"),
            "EJABBERD_LOG_PATH": str(directory / "ejabberd.log"),
            "ERL_LIBS": _ejabberd_libs() or "",
            "HOME": str(directory),  # the Erlang cookie file and crash dumps stay in the test's directory
            "ERL_CRASH_DUMP_BYTES": "0",
        }
