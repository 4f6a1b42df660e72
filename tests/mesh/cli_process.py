"""Run the ``mesh`` command in a subprocess, as a user would."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def mesh_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("MESH_BROKER_URL", "MESH_NAMESPACE")}
    env["PYTHONPATH"] = str(ROOT)
    env.update(extra)
    return env


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str


async def mesh(*args: str, timeout: float = 30.0, **env: str) -> Result:
    """Run ``mesh ARGS`` to completion."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "mesh.cli",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=mesh_env(**env),
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    assert proc.returncode is not None
    return Result(proc.returncode, out.decode(), err.decode())


@dataclass
class Service:
    """A long-running ``mesh run`` / ``mesh up``; ``stdout_lines`` and ``stderr_lines`` fill as it talks."""

    proc: asyncio.subprocess.Process
    stdout_lines: list[str] = field(default_factory=list)
    stderr_lines: list[str] = field(default_factory=list)
    _changed: asyncio.Event = field(default_factory=asyncio.Event)
    _readers: list[asyncio.Task[None]] = field(default_factory=list)

    async def wait_for_line(self, text: str, *, stream: str = "stderr", timeout: float = 30.0) -> str:
        lines = self.stdout_lines if stream == "stdout" else self.stderr_lines
        try:
            async with asyncio.timeout(timeout):
                while True:
                    self._changed.clear()  # before looking, so a line arriving now wakes us
                    for line in lines:
                        if text in line:
                            return line
                    if self.proc.returncode is not None:
                        raise AssertionError(f"exited {self.proc.returncode} before {text!r}:\n{self.output}")
                    await self._changed.wait()
        except TimeoutError:
            raise AssertionError(f"no line with {text!r} within {timeout:g} s:\n{self.output}") from None

    async def stop(self, sig: int = signal.SIGINT, timeout: float = 30.0) -> int:
        if self.proc.returncode is None:
            self.proc.send_signal(sig)
        code = await asyncio.wait_for(self.proc.wait(), timeout)
        await asyncio.gather(*self._readers)
        return code

    @property
    def output(self) -> str:
        return "".join(self.stdout_lines) + "\n--- stderr ---\n" + "".join(self.stderr_lines)


async def start_mesh(*args: str, **env: str) -> Service:
    return await spawn([sys.executable, "-m", "mesh.cli", *args], env=mesh_env(**env))


async def spawn(argv: list[str], *, env: dict[str, str], cwd: Path | None = None) -> Service:
    """A long-running command (``mesh up``, ``mesh run``), its lines read as they come."""
    proc = await asyncio.create_subprocess_exec(
        *argv,
        cwd=cwd,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    service = Service(proc)

    async def read(stream: asyncio.StreamReader | None, lines: list[str]) -> None:
        assert stream is not None
        while line := await stream.readline():
            lines.append(line.decode())
            service._changed.set()
        service._changed.set()

    service._readers = [
        asyncio.create_task(read(proc.stdout, service.stdout_lines)),
        asyncio.create_task(read(proc.stderr, service.stderr_lines)),
    ]
    return service
