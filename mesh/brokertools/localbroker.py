"""Start a Mosquitto for local use: the local binary or a container, from mosquitto.conf.

``mesh up`` and the test suite both start brokers through this module. The repository's
``mosquitto.conf`` is the single source of settings; only its ``listener`` line is rewritten
to pick the port (and to listen on all interfaces inside a container).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import gc
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol

from mesh.errors import ConfigError, MeshError

CONTAINER_IMAGE = "eclipse-mosquitto:2.0.20"
_LISTENER_LINE = re.compile(r"^listener\s+.*$", re.MULTILINE)

INSTALL_HINT = (
    "install Mosquitto (Debian/Ubuntu: `sudo apt-get install mosquitto`, macOS: `brew install mosquitto`), "
    "start a Docker engine, or point MESH_BROKER_URL at a running MQTT v5 broker"
)


class BrokerUnavailableError(MeshError):
    """No broker could be started here; the message says how to get one."""


class RunningBroker(Protocol):
    """A broker this process started."""

    host: str
    port: int

    @property
    def url(self) -> str: ...

    def stop(self) -> None: ...


def default_config_path() -> Path:
    """The repository's mosquitto.conf (or the copy packaged inside ``mesh``)."""
    package = Path(__file__).resolve().parent.parent  # mesh/, where the wheel packages it
    for candidate in (package / "mosquitto.conf", package.parent / "mosquitto.conf"):
        if candidate.is_file():
            return candidate
    raise ConfigError(f"mosquitto.conf not found next to {package}; pass its path explicitly")


def render_config(config_path: Path, *, port: int, bind: str | None) -> str:
    """The config text with its listener replaced by ``listener <port> [<bind>]``."""
    text = config_path.read_text()
    listener = f"listener {port} {bind}" if bind else f"listener {port}"
    if not _LISTENER_LINE.search(text):
        raise ConfigError(f"{config_path} has no 'listener' line; add e.g. 'listener 1883 127.0.0.1'")
    return _LISTENER_LINE.sub(listener, text, count=1)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_is_free(host: str, port: int) -> bool:
    """Whether a server could listen on ``host:port`` now (as servers do, with SO_REUSEADDR)."""
    try:
        socket.create_server((host, port)).close()
    except OSError as exc:
        return exc.errno != errno.EADDRINUSE  # another error (e.g. an unknown host) is the server's to report
    return True


def port_answers(host: str, port: int, timeout: float = 0.5) -> bool:
    with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=timeout):
        return True
    return False


class LocalBroker:
    """A ``mosquitto`` process on 127.0.0.1, restartable on the same port."""

    def __init__(
        self,
        config_path: Path,
        *,
        port: int | None = None,
        executable: str | None = None,
        extra_config: str = "",
        workdir: Path | None = None,
        die_with_parent: bool = False,
    ) -> None:
        """``workdir``: where its config and log go (created; default a new temp dir).

        ``die_with_parent``: on Linux the kernel stops the broker (SIGTERM) when the thread that
        started it dies, however it dies (kill -9 included); start it from a thread that lives
        as long as the broker should (the main thread).
        """
        self.host = "127.0.0.1"
        self.port = port or free_port()
        found = executable or shutil.which("mosquitto") or _sbin("mosquitto")
        if found is None:
            raise BrokerUnavailableError(f"no mosquitto binary on PATH; {INSTALL_HINT}")
        self.executable: str = found
        if workdir is not None:
            workdir.mkdir(parents=True, exist_ok=True)
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="mesh-mosquitto-"))
        self._die_with_parent = die_with_parent
        self.config_file = self.workdir / "mosquitto.conf"
        text = render_config(config_path, port=self.port, bind=self.host)
        if die_with_parent and hasattr(os, "geteuid") and os.geteuid() == 0:
            # Started as root, Mosquitto switches to user 'mosquitto', and a change of user makes
            # the kernel forget the parent-death signal: keep the user that runs us instead.
            extra_config = f"user root\n{extra_config}"
        self.config_file.write_text(text + ("\n" + extra_config if extra_config else ""))
        self.log_file = self.workdir / "mosquitto.log"
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"mqtt://{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def start(self, timeout: float = 10.0) -> None:
        # Else the other listener's answer would pass for this broker's.
        if port_answers(self.host, self.port, timeout=0.2):
            raise BrokerUnavailableError(
                f"port {self.port} on {self.host} is already in use; stop what listens there or choose another port"
            )
        log = self.log_file.open("ab")
        # A session of its own: Ctrl-C in the terminal must not kill the broker before the
        # components using it have shut down cleanly; whoever started it stops it.
        command = [self.executable, "-c", str(self.config_file)]
        # Mosquitto's log (log_dest stdout) is block-buffered into the file: line-buffer it, or
        # what it says at start (check_broker_log) shows only once it stops.
        if stdbuf := shutil.which("stdbuf"):
            command = [stdbuf, "-oL", *command]
        self._process = subprocess.Popen(  # noqa: S603 - our own argument list, no shell
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_dying_with_parent() if self._die_with_parent else None,
        )
        log.close()
        deadline = time.monotonic() + timeout
        while not port_answers(self.host, self.port, timeout=0.2):
            if self._process.poll() is not None:
                raise BrokerUnavailableError(
                    f"mosquitto exited with code {self._process.returncode} on port {self.port}; "
                    f"its log:\n{self.log_file.read_text()[-2000:]}"
                )
            if time.monotonic() > deadline:
                self.stop()
                raise BrokerUnavailableError(f"mosquitto did not listen on port {self.port} within {timeout:g} s")
            time.sleep(0.02)

    def stop(self) -> None:
        if self._process is None:
            return
        self._process.terminate()
        try:
            self._process.wait(5)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait(5)
        self._process = None

    def kill(self) -> None:
        """Stop abruptly (SIGKILL), as a crash would."""
        if self._process is not None:
            self._process.kill()
            self._process.wait(5)
            self._process = None

    def remove(self) -> None:
        """Stop it for good and delete its working directory (config, log)."""
        self.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)


class ContainerBroker:
    """Mosquitto in a Docker container through testcontainers (pinned image)."""

    def __init__(self, config_path: Path, *, port: int | None = None) -> None:
        try:
            from docker.errors import DockerException  # type: ignore[import-untyped]  # docker ships no stubs
            from testcontainers.community.mqtt import MosquittoContainer
        except ImportError as exc:
            raise BrokerUnavailableError(f"testcontainers is not installed ({exc}); {INSTALL_HINT}") from exc
        if not os.environ.get("DOCKER_HOST") and not Path("/var/run/docker.sock").exists():
            raise BrokerUnavailableError(f"no Docker engine (no DOCKER_HOST, no /var/run/docker.sock); {INSTALL_HINT}")
        try:
            self._container = MosquittoContainer(CONTAINER_IMAGE)
            if port is not None:
                self._container.with_bind_ports(1883, port)
        except DockerException as exc:
            _collect_leaked_sockets()
            raise BrokerUnavailableError(f"no Docker engine answers ({exc}); {INSTALL_HINT}") from exc
        self._workdir = Path(tempfile.mkdtemp(prefix="mesh-mosquitto-"))
        self.config_file = self._workdir / "mosquitto.conf"
        self.config_file.write_text(render_config(config_path, port=1883, bind=None))
        self.host = "127.0.0.1"
        self.port = 0

    @property
    def url(self) -> str:
        return f"mqtt://{self.host}:{self.port}"

    def start(self) -> None:
        self._container.start(configfile=str(self.config_file))
        self.host = self._container.get_container_host_ip()
        self.port = int(self._container.get_exposed_port(1883))

    def stop(self) -> None:
        try:
            self._container.stop()
        finally:
            shutil.rmtree(self._workdir, ignore_errors=True)


@contextlib.contextmanager
def running_broker(
    config_path: Path | None = None, *, prefer: str = "binary", port: int | None = None
) -> Iterator[RunningBroker]:
    """Start a broker from ``config_path``, trying the binary or the container first.

    ``prefer="binary"`` (``mesh up``) falls back to a container; ``prefer="container"``
    (the tests, per DESIGN) falls back to the binary. ``port`` fixes the host port (else a
    free one). Raises :class:`BrokerUnavailableError` saying how to get a broker when neither
    works.
    """
    config_path = config_path or default_config_path()
    makers = [_start_binary, _start_container]
    if prefer == "container":
        makers.reverse()
    reasons = []
    for make in makers:
        try:
            broker = make(config_path, port)
        except BrokerUnavailableError as exc:
            reasons.append(str(exc))
            continue
        try:
            yield broker
        finally:
            broker.stop()
        return
    raise BrokerUnavailableError("could not start a Mosquitto broker: " + " | ".join(reasons))


def _start_binary(config_path: Path, port: int | None) -> RunningBroker:
    broker = LocalBroker(config_path, port=port)
    try:
        broker.start()
    except BaseException:
        broker.remove()  # the error already quotes the log
        raise
    return _Removing(broker)


class _Removing:
    """A LocalBroker whose stop() also deletes its working directory (for running_broker)."""

    def __init__(self, broker: LocalBroker) -> None:
        self.broker = broker
        self.host, self.port, self.log_file = broker.host, broker.port, broker.log_file

    @property
    def url(self) -> str:
        return self.broker.url

    def stop(self) -> None:
        self.broker.remove()


def _start_container(config_path: Path, port: int | None) -> RunningBroker:
    if os.environ.get("MESH_NO_DOCKER"):
        raise BrokerUnavailableError("containers disabled by MESH_NO_DOCKER")
    broker = ContainerBroker(config_path, port=port)
    try:
        broker.start()
    except BaseException:
        # A container that failed to start may still exist, and its config dir does.
        with contextlib.suppress(Exception):
            broker.stop()
        raise
    return broker


def _collect_leaked_sockets() -> None:
    # The docker SDK leaves its probe socket open when the engine does not answer.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()


_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


def _dying_with_parent() -> Callable[[], None] | None:
    """A preexec_fn asking the kernel to SIGTERM the child when its parent dies (Linux only)."""
    if not sys.platform.startswith("linux"):
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up before the fork, not in the child
    parent = os.getpid()

    def arrange() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # the parent died before the prctl: nobody would stop us
            os._exit(1)

    return arrange


def _sbin(name: str) -> str | None:
    # Debian installs mosquitto in /usr/sbin, which is not on a normal user's PATH.
    candidate = Path("/usr/sbin") / name
    return str(candidate) if candidate.is_file() else None
