"""What a bridge's supervised child process shares, whether an A2E worker or an ACP agent.

Both run a command on pipes (:class:`~agents.a2e.pipes.WorkerPipes`) and end the same way:

- when stdout closes or the process exits, wait (bounded) for the other and for the last
  lines in the pipes, record the exit status, let the subclass fail what was pending
  (:meth:`ChildProcess._ended`), then log how it ended unless it was asked to stop;
- a stop closes stdin, waits, sends SIGTERM, waits, sends SIGKILL (the A2E subprocess
  transport's timings; a worker first sends ``shutdown``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shlex
import signal
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from agents.a2e.errors import WorkerStartError
from agents.a2e.pipes import WorkerPipes

__all__ = ["CLOSE_WAIT_S", "EXIT_GRACE_S", "TERM_WAIT_S", "ChildProcess", "WorkerCommand", "within"]

log = logging.getLogger(__name__)

#: After stdin closes, how long a child has to exit before SIGTERM; then before SIGKILL.
CLOSE_WAIT_S = 3.0
TERM_WAIT_S = 2.0
#: How long the end of a child waits for its exit, or its last lines, once the other came.
EXIT_GRACE_S = 1.0


@dataclass(frozen=True, slots=True)
class WorkerCommand:
    """How to run a worker: ``argv``, an optional working directory, variables added to the environment."""

    argv: tuple[str, ...]
    cwd: Path | None = None
    env: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of(
        cls, command: str | Sequence[str], *, cwd: str | Path | None = None, env: Mapping[str, str] | None = None
    ) -> WorkerCommand:
        """``command`` as an argv list, or a string split as a POSIX shell would."""
        argv = tuple(shlex.split(command)) if isinstance(command, str) else tuple(command)
        if not argv or not all(isinstance(arg, str) and arg for arg in argv):
            raise ValueError(f"worker command {command!r} is empty or not all strings; give e.g. ['node', 'worker.js']")
        return cls(argv, Path(cwd) if cwd is not None else None, dict(env or {}))

    def __str__(self) -> str:
        return shlex.join(self.argv)


class ChildProcess:
    """The exit, the stderr tail, the kill and the stop sequence of one child process.

    Subclasses set ``name``, ``command`` (printable), ``exited``, ``exit_reason`` and the
    private fields below in their constructor, and implement :meth:`_ended`.
    """

    #: What the child is called in messages: "worker", "ACP agent".
    kind: ClassVar[str] = "process"
    #: The mesh YAML key that configures it ("worker", "acp"), for the fix in error messages.
    config_key: ClassVar[str] = "worker"

    name: str
    command: WorkerCommand
    #: Resolves with the exit status (negative: killed by that signal).
    exited: asyncio.Future[int]
    #: Why the mesh ended it, when it did; part of the message pending work fails with.
    exit_reason: str
    max_line_bytes: int
    stderr_lines: int
    started_at: float
    _pipes: WorkerPipes | None
    _finishing: asyncio.Task[None] | None
    _stopping: bool
    _on_exit: Callable[[Any], None] | None

    def _ended(self, status: int) -> None:
        """The child is gone with ``status``: fail what waits on it."""
        raise NotImplementedError

    def _bad_line(self, problem: str, head: bytes) -> None:
        log.warning("%s %s: skipped a stdout line that is %s: %r", self.kind, self.name, problem, head)

    async def _spawn(self, on_message: Callable[[dict[str, Any]], None]) -> None:
        """Run the command on pipes; :class:`WorkerStartError` names the command and the fix."""
        try:
            self._pipes = await WorkerPipes.spawn(
                self.command.argv,
                cwd=self.command.cwd,
                env=self.command.env,
                name=self.name,
                on_message=on_message,
                on_bad=self._bad_line,
                on_closed=self._closing,
                max_line_bytes=self.max_line_bytes,
                stderr_lines=self.stderr_lines,
            )
        except OSError as exc:
            where = f" in {self.command.cwd}" if self.command.cwd else ""
            key = self.config_key
            raise WorkerStartError(
                f"{self.kind} {self.name!r}: cannot run {self.command}{where}: {exc}; check {key}.command and {key}.cwd"
            ) from exc
        self.started_at = time.monotonic()

    # ------------------------------------------------------------------ how it ended

    def stderr_tail(self) -> list[str]:
        return list(self._pipes.stderr_tail) if self._pipes is not None else []

    def stderr_text(self) -> str:
        tail = self.stderr_tail()
        return f"; last stderr lines: {' | '.join(tail)}" if tail else "; no stderr output"

    def gone_text(self, status: int | None = None) -> str:
        """How the child ended (status or signal, why, its last stderr lines), for logs and errors."""
        if status is None:
            status = self.exited.result() if self.exited.done() else -1
        how = f"exited with status {status}"
        if status < 0:
            with contextlib.suppress(ValueError):
                how = f"was killed by {signal.Signals(-status).name}"
        why = f" ({self.exit_reason})" if self.exit_reason else ""
        return f"{self.kind} {self.name!r} ({self.command}) {how}{why}{self.stderr_text()}"

    def _closing(self) -> None:
        """The pipes' callback when stdout closed or the process exited: finish, once."""
        if self._finishing is None:
            self._finishing = asyncio.get_running_loop().create_task(self._finish())

    async def _finish(self) -> None:
        pipes = self._pipes
        if pipes is None:
            raise RuntimeError("the worker's pipes are not open: _finish runs only after a start")
        if not await within(pipes.exited.wait(), EXIT_GRACE_S):
            self.kill("it closed its stdout")  # alive but deaf: it can answer nothing any more
            await pipes.exited.wait()
        # The last answers and stderr lines may still be in the pipes when the exit is reported.
        await within(pipes.stdout_closed.wait(), EXIT_GRACE_S)
        await within(pipes.stderr_closed.wait(), EXIT_GRACE_S)
        status = pipes.returncode if pipes.returncode is not None else -1
        if not self.exited.done():
            self.exited.set_result(status)
        self._ended(status)
        pipes.close()
        if not self._stopping:
            log.warning("%s", self.gone_text(status))
        if self._on_exit is not None:
            self._on_exit(self)

    # ------------------------------------------------------------------ ending it

    def kill(self, reason: str) -> None:
        """Kill the process now; ``reason`` goes into the message its pending work fails with."""
        if self._pipes is not None and self._pipes.returncode is None:
            self.exit_reason = self.exit_reason or reason
            log.warning("%s %s: killing it: %s", self.kind, self.name, reason)
            self._pipes.send_signal(signal.SIGKILL)

    async def _terminate(self, reason: str, farewell: Callable[[], Awaitable[None]] | None = None) -> int:
        """``farewell()`` (if any), close stdin, wait, SIGTERM, wait, SIGKILL; the exit status."""
        self._stopping = True
        self.exit_reason = self.exit_reason or reason
        pipes = self._pipes
        if pipes is None:
            return -1
        if not pipes.exited.is_set():
            if farewell is not None:
                await farewell()
            pipes.close_stdin()
            for wait_s, then in ((CLOSE_WAIT_S, signal.SIGTERM), (TERM_WAIT_S, signal.SIGKILL)):
                if await within(pipes.exited.wait(), wait_s):
                    break
                log.warning("%s %s did not exit within %g s; sending %s", self.kind, self.name, wait_s, then.name)
                pipes.send_signal(then)
        await pipes.exited.wait()
        return await asyncio.shield(self.exited)


async def within(waiting: Awaitable[object], timeout: float) -> bool:
    """Whether ``waiting`` finished within ``timeout`` seconds."""
    try:
        await asyncio.wait_for(waiting, timeout)
    except TimeoutError:
        return False
    return True
