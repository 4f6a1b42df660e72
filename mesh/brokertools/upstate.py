"""What a running ``mesh up`` tells the other commands: one lock-and-state file per namespace.

``<state dir>/up/<namespace>.json`` holds the pid of the ``mesh up`` serving the namespace, the
broker it chose, the broker process it started (with its files in ``<namespace>.mosquitto/``
next to it) and its gateways' URLs. ``mesh up`` keeps an exclusive ``flock`` on the file while
it runs, so the kernel says whether its owner lives: a lock nobody holds marks a stale file,
left by a ``mesh up`` that was killed (kill -9), whose broker and files the next ``mesh up`` of
the namespace removes (:meth:`UpClaim.take`). Other commands read the broker URL of a live
one (:func:`running_up_broker_url`); ``--broker`` and ``$MESH_BROKER_URL`` override it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import json
import logging
import os
import shutil
import signal
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from urllib.parse import quote, unquote

from mesh.brokertools.localbroker import free_port, port_is_free
from mesh.config.statedir import default_state_dir
from mesh.errors import ConfigError

__all__ = [
    "UpAlreadyRunningError",
    "UpClaim",
    "UpRecord",
    "running_up",
    "running_up_broker_url",
    "running_up_of_broker",
    "running_up_with_broker",
    "running_ups",
    "suggested_http_port",
    "up_files",
]

log = logging.getLogger(__name__)

# A reader holds its shared lock for microseconds; a start that meets one tries again this long.
_CLAIM_PATIENCE_S = 1.0


@dataclass(frozen=True, slots=True)
class UpRecord:
    """What the state file says about one ``mesh up``."""

    pid: int
    namespace: str
    broker_url: str | None = None
    #: The Mosquitto this ``mesh up`` started (None: it uses a broker that was already running).
    broker_pid: int | None = None
    gateways: list[str] = field(default_factory=list)
    #: A secured ``mesh up`` (the default; not ``--insecure``): its broker takes only the users of
    #: ``credentials``, a directory of one password file per component (mesh.config.credentials).
    secure: bool = False
    credentials: str | None = None
    #: The private CA of its TLS broker (``--secure``), None for plain MQTT on loopback.
    ca_file: str | None = None
    #: The admin user's password file: ``mesh run`` adds its components' users with it.
    admin_file: str | None = None
    #: Where the signing keys of its components are (and ``jwks.json``, the keys cards are checked with).
    keys: str | None = None
    #: The API key of its HTTP gateways (0600; kept across starts, see mesh.cli.up_edge).
    api_key_file: str | None = None

    def to_json(self) -> bytes:
        return json.dumps(asdict(self)).encode()

    @classmethod
    def from_json(cls, data: bytes) -> UpRecord | None:
        """The record, or None for an empty or unreadable file (one being written, or damaged)."""
        try:
            fields = json.loads(data)
            if not isinstance(fields, dict):
                return None
            known = {f.name for f in dataclasses.fields(cls)}  # a newer mesh up may write more
            return cls(**{key: value for key, value in fields.items() if key in known})
        except (ValueError, TypeError):
            return None


class UpAlreadyRunningError(ConfigError):
    """A live ``mesh up`` serves the namespace already (exit 2: nothing was started or cleared)."""

    def __init__(self, record: UpRecord | None, namespace: str) -> None:
        self.record = record
        if record is None:
            message = f"mesh up is already running on namespace {namespace!r} (it is starting)"
        else:
            gateways = f", gateways {', '.join(record.gateways)}" if record.gateways else ""
            message = (
                f"mesh up is already running on namespace {namespace!r} (pid {record.pid}): broker "
                f"{record.broker_url or '(being chosen)'}{gateways}"
            )
        super().__init__(
            f"{message}. Use it (`mesh send echo hi` finds its "
            "broker), stop it (Ctrl-C in its terminal, or kill "
            f"{record.pid if record else 'it'}), or run another one beside it on another namespace and HTTP port: "
            + another_up_command(record)
        )


def another_up_command(record: UpRecord | None) -> str:
    """The command line of a second ``mesh up`` that collides with nothing of ``record``'s."""
    broker = ""
    if record is not None and record.broker_url and not record.secure:  # --secure starts a broker of its own
        broker = f" --broker {record.broker_url}"
    return (
        f"MESH_HTTP_PORT={suggested_http_port()} mesh up --namespace {record.namespace if record else 'mesh'}-2{broker}"
    )


def suggested_http_port() -> int:
    """A free port for another gateway: the first free one after 8080, else any."""
    return next((port for port in range(8081, 8100) if port_is_free("127.0.0.1", port)), None) or free_port()


@dataclass(frozen=True, slots=True)
class UpFiles:
    """Where ``mesh up`` of one namespace keeps its state file and its broker's files."""

    state: Path
    broker_dir: Path

    @property
    def secure_dir(self) -> Path:
        """The users, rules, credentials and keys of a secured ``mesh up`` (removed with the broker's files)."""
        return self.broker_dir / "secure"


def up_files(namespace: str, state_dir: Path | None = None) -> UpFiles:
    base = (state_dir or default_state_dir()) / "up"
    key = quote(namespace, safe="")  # a namespace may hold '/'
    return UpFiles(state=base / f"{key}.json", broker_dir=base / f"{key}.mosquitto")


class UpClaim:
    """This process's exclusive hold on a namespace's state file, from :meth:`take` to :meth:`release`."""

    def __init__(self, files: UpFiles, fd: int, namespace: str) -> None:
        self.files = files
        self.namespace = namespace
        self._fd = fd

    @classmethod
    def take(cls, namespace: str, state_dir: Path | None = None) -> UpClaim:
        """Lock the namespace's state file, cleaning what a dead ``mesh up`` left behind.

        Raises :class:`UpAlreadyRunningError`, having changed nothing, when a live one holds it.
        """
        files = up_files(namespace, state_dir)
        files.state.parent.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + _CLAIM_PATIENCE_S
        while True:
            fd = os.open(files.state, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                os.close(fd)
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
                if time.monotonic() > deadline:
                    raise UpAlreadyRunningError(_read_record(files.state), namespace) from None
                time.sleep(0.05)
                continue
            if _same_file(fd, files.state):
                break
            os.close(fd)  # a leaving owner unlinked it between our open and our lock: take the new one
        claim = cls(files, fd, namespace)
        claim._clean_stale()
        claim.write(UpRecord(pid=os.getpid(), namespace=namespace))
        return claim

    def write(self, record: UpRecord) -> None:
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, record.to_json(), 0)

    def release(self) -> None:
        """Remove the state file and the broker's files (the broker is stopped), then unlock."""
        if self._fd < 0:
            return
        shutil.rmtree(self.files.broker_dir, ignore_errors=True)
        with contextlib.suppress(FileNotFoundError):
            self.files.state.unlink()
        os.close(self._fd)  # unlocks
        self._fd = -1

    def _clean_stale(self) -> None:
        stale = UpRecord.from_json(os.pread(self._fd, 1 << 16, 0))
        stopped = ""
        if stale is not None and stale.broker_pid is not None and _stop_our_broker(stale.broker_pid, self.files):
            stopped = f", stopped its Mosquitto (pid {stale.broker_pid})"
        leftovers = self.files.broker_dir.exists()
        shutil.rmtree(self.files.broker_dir, ignore_errors=True)
        if stale is not None:
            log.warning(
                "a mesh up of namespace %r (pid %d) ended without cleaning up; removed its state%s%s",
                self.namespace,
                stale.pid,
                stopped,
                f" and {self.files.broker_dir}" if leftovers else "",
            )


def running_up(namespace: str, state_dir: Path | None = None) -> UpRecord | None:
    """The record of the live ``mesh up`` of ``namespace``, if one runs (it holds the lock)."""
    path = up_files(namespace, state_dir).state
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EAGAIN, errno.EACCES):  # held: its owner lives
                return UpRecord.from_json(os.pread(fd, 1 << 16, 0))
            raise
        return None  # nobody holds it: stale
    finally:
        os.close(fd)


def running_ups(state_dir: Path | None = None) -> list[UpRecord]:
    """The records of every live ``mesh up`` here, of any namespace."""
    base = up_files("-", state_dir).state.parent
    found: list[UpRecord] = []
    with contextlib.suppress(OSError):
        for path in sorted(base.glob("*.json")):
            record = running_up(unquote(path.stem), state_dir)
            if record is not None:
                found.append(record)
    return found


def running_up_with_broker(url: str, state_dir: Path | None = None) -> UpRecord | None:
    """A live ``mesh up`` here whose broker is ``url``, secured or open."""
    return next((r for r in running_ups(state_dir) if _same_url(r.broker_url, url)), None)


def running_up_broker_url(namespace: str | None, state_dir: Path | None = None) -> str | None:
    """The broker the live ``mesh up`` of ``namespace`` uses; with none on that namespace, the one
    broker every live ``mesh up`` here uses (``mesh run agents.yaml`` of another namespace next to
    ``mesh up`` joins its broker), if they agree on one."""
    if namespace:
        record = running_up(namespace, state_dir)
        if record is not None:
            return record.broker_url
    base = up_files("-", state_dir).state.parent
    try:
        names = [unquote(path.stem) for path in base.glob("*.json")]
    except OSError:
        return None
    urls = {
        record.broker_url for name in names if (record := running_up(name, state_dir)) is not None and record.broker_url
    }
    return urls.pop() if len(urls) == 1 else None


def running_up_of_broker(url: str, namespace: str | None = None, state_dir: Path | None = None) -> UpRecord | None:
    """The live secured ``mesh up`` whose broker is ``url`` (that of ``namespace`` first), if any:
    where a command connecting there finds its credentials."""
    records = [running_up(namespace, state_dir)] if namespace else []
    base = up_files("-", state_dir).state.parent
    with contextlib.suppress(OSError):
        records += [running_up(unquote(path.stem), state_dir) for path in sorted(base.glob("*.json"))]
    return next(
        (r for r in records if r is not None and r.secure and r.credentials and _same_url(r.broker_url, url)), None
    )


def broker_started_by_up(url: str, state_dir: Path | None = None) -> bool:
    """Whether ``url`` is the Mosquitto a live ``mesh up`` started here (one node: every retained
    card reaches every subscriber, so clients need no roll call)."""
    base = up_files("-", state_dir).state.parent
    try:
        names = [unquote(path.stem) for path in base.glob("*.json")]
    except OSError:
        return False
    return any(
        (record := running_up(name, state_dir)) is not None
        and record.broker_pid is not None
        and _same_url(record.broker_url, url)
        for name in names
    )


def _same_url(a: str | None, b: str) -> bool:
    if a is None:
        return False
    local = ("localhost", "127.0.0.1", "[::1]")
    for name in local:
        a, b = a.replace(name, "localhost"), b.replace(name, "localhost")
    return a.split("?")[0].rstrip("/") == b.split("?")[0].rstrip("/")


def _read_record(path: Path) -> UpRecord | None:
    try:
        return UpRecord.from_json(path.read_bytes())
    except OSError:
        return None


def _same_file(fd: int, path: Path) -> bool:
    try:
        return os.path.samestat(os.fstat(fd), path.stat())
    except FileNotFoundError:
        return False


def _stop_our_broker(pid: int, files: UpFiles) -> bool:
    """Stop ``pid`` if it is still the Mosquitto of ``files`` (not a process that reused the pid)."""
    if str(files.broker_dir) not in _command_line(pid):
        return False
    for sig, wait_s in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if str(files.broker_dir) not in _command_line(pid):
                return True
            time.sleep(0.02)
    return True


def _command_line(pid: int) -> str:
    """The command line of ``pid`` ("" when it is gone): /proc on Linux, ``ps`` elsewhere."""
    proc = Path(f"/proc/{pid}/cmdline")
    if Path("/proc/self").exists():
        try:
            return proc.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            return ""
    # ps from PATH like any CLI; a fixed argument list, no shell
    found = subprocess.run(  # noqa: S603
        ["ps", "-o", "command=", "-p", str(pid)],  # noqa: S607
        capture_output=True,
        text=True,
        check=False,
    )
    return found.stdout
