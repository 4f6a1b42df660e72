"""The stdio of one worker process, driven from the event loop without reader tasks.

A :class:`WorkerPipes` is the process's ``asyncio.SubprocessProtocol``: stdout bytes are
decoded into JSON objects and handed to ``on_message`` as they arrive, stderr lines are kept
as a bounded tail, and writes to stdin honour the pipe's flow control.

Stdout is a pipe of our own, read straight from the loop's selector callback: asyncio's
subprocess layer would hand each chunk over one loop iteration later (``call_soon``) and read
it into a 256 KiB buffer, which costs an mmap and a page fault per read. Answers are the hot
path of every call, so they get neither.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from agents.a2e.framing import NdjsonDecoder

__all__ = ["WorkerPipes"]

log = logging.getLogger(__name__)

_READ_BYTES = 64 * 1024  # per read of stdout: under malloc's mmap threshold
_STDERR_LINE_BYTES = 2000  # longer stderr lines are cut to this in logs and messages


class WorkerPipes(asyncio.SubprocessProtocol):
    """Build with :meth:`spawn`. ``on_closed`` is called when stdout closes or the process exits."""

    def __init__(
        self,
        name: str,
        *,
        on_message: Callable[[dict[str, Any]], None],
        on_bad: Callable[[str, bytes], None],
        on_closed: Callable[[], None],
        max_line_bytes: int,
        stderr_lines: int,
    ) -> None:
        self.name = name
        self.stderr_tail: deque[str] = deque(maxlen=stderr_lines)
        self.stdout_closed = asyncio.Event()
        self.stderr_closed = asyncio.Event()
        self.exited = asyncio.Event()
        self._on_message = on_message
        self._on_closed = on_closed
        self._decoder = NdjsonDecoder(max_line_bytes=max_line_bytes, on_bad=on_bad)
        self._stderr_partial = b""
        self._transport: asyncio.SubprocessTransport | None = None
        self._stdin: asyncio.WriteTransport | None = None
        self._stdout: int | None = None  # the read end of the stdout pipe, while open
        self._loop: asyncio.AbstractEventLoop | None = None  # where _stdout is watched
        self._resumed: asyncio.Future[None] | None = None

    @classmethod
    async def spawn(
        cls, argv: Sequence[str], *, cwd: Path | None, env: Mapping[str, str], **options: Any
    ) -> WorkerPipes:
        """Start ``argv`` with piped stdio; ``OSError`` if it cannot be run."""
        stdout, child_stdout = os.pipe()
        try:
            _, pipes = await asyncio.get_running_loop().subprocess_exec(
                lambda: cls(**options),
                *argv,
                cwd=cwd,
                env={**os.environ, **env},
                stdin=asyncio.subprocess.PIPE,
                stdout=child_stdout,
                stderr=asyncio.subprocess.PIPE,
            )
        except BaseException:
            os.close(stdout)
            raise
        finally:
            os.close(child_stdout)  # the child has its copy: EOF comes when the child closes it
        pipes._read_stdout(stdout)
        return pipes

    # ------------------------------------------------------------------ the protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if not isinstance(transport, asyncio.SubprocessTransport):
            raise TypeError(f"worker pipes need a subprocess transport, got {type(transport).__name__}")
        self._transport = transport
        stdin = transport.get_pipe_transport(0)
        if not isinstance(stdin, asyncio.WriteTransport):
            raise TypeError("the worker was started without a stdin pipe (stdin=PIPE is needed)")
        self._stdin = stdin

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        raw = data.encode() if isinstance(data, str) else data
        if fd == 2:
            *lines, self._stderr_partial = (self._stderr_partial + raw).split(b"\n")
            for line in lines:
                self._stderr_line(line)
            if len(self._stderr_partial) > _STDERR_LINE_BYTES:  # a huge line: keep its start only
                self._stderr_line(self._stderr_partial)
                self._stderr_partial = b""

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if fd == 0:
            self.resume_writing()  # nothing more can be written: release the writers waiting
        elif fd == 2:
            self._stderr_line(self._stderr_partial)
            self.stderr_closed.set()

    def process_exited(self) -> None:
        self.exited.set()
        self.resume_writing()
        self._on_closed()

    def pause_writing(self) -> None:
        if self._resumed is None:
            self._resumed = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        resumed, self._resumed = self._resumed, None
        if resumed is not None and not resumed.done():
            resumed.set_result(None)

    # ------------------------------------------------------------------ stdout

    def _read_stdout(self, fd: int) -> None:
        os.set_blocking(fd, False)
        self._stdout = fd
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(fd, self._stdout_readable)

    def _stdout_readable(self) -> None:
        if self._stdout is None:  # the reader is added only once stdout is known
            return
        try:
            data = os.read(self._stdout, _READ_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            log.warning("worker %s: reading its stdout failed: %s", self.name, exc)
            data = b""
        if data:
            for obj in self._decoder.feed(data):
                self._on_message(obj)
            return
        self._close_stdout()
        for obj in self._decoder.close():
            self._on_message(obj)
        self.stdout_closed.set()
        self._on_closed()

    def _close_stdout(self) -> None:
        fd, self._stdout = self._stdout, None
        if fd is not None:
            if self._loop is not None and not self._loop.is_closed():
                self._loop.remove_reader(fd)
            os.close(fd)

    def _stderr_line(self, raw: bytes) -> None:
        line = raw[:_STDERR_LINE_BYTES].decode(errors="replace").rstrip()
        if line:
            self.stderr_tail.append(line)
            log.info("worker %s stderr: %s", self.name, line)

    # ------------------------------------------------------------------ control

    @property
    def returncode(self) -> int | None:
        return self._transport.get_returncode() if self._transport is not None else None

    def write(self, data: bytes) -> bool:
        """Queue ``data`` for stdin; ``False`` if stdin is closed."""
        if self._stdin is None or self._stdin.is_closing():
            return False
        self._stdin.write(data)
        return True

    async def drain(self) -> None:
        """Wait while the pipe is full (the worker does not read fast enough)."""
        if self._resumed is not None:
            await asyncio.shield(self._resumed)

    def close_stdin(self) -> None:
        if self._stdin is not None:
            self._stdin.close()

    def send_signal(self, sig: signal.Signals) -> None:
        if self._transport is not None and self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self._transport.send_signal(sig)

    def close(self) -> None:
        """Release the pipes (after the process exited)."""
        self._close_stdout()  # still open if a process the worker started holds its stdout
        if self._transport is not None:
            self._transport.close()
