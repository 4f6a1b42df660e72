"""The line ``mesh send`` keeps updated on a terminal while it waits: ``waiting for countdown… 1.2 s, working``.

Written to stderr in place (carriage return, erase line) a few times a second and erased when
the wait ends, so it never mixes with the answer on stdout. Only on a terminal: on a pipe or a
file, :func:`progress_line` gives a :class:`NoProgress` that writes nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from typing import Protocol, TextIO

__all__ = ["NoProgress", "Progress", "ProgressLine", "progress_line"]

#: Seconds between two redraws.
TICK_S = 0.1
_ERASE = "\r\x1b[K"


class Progress(Protocol):
    """What a waiting command tells its progress display."""

    def state(self, state: str) -> None: ...

    def say(self, line: str) -> None:
        """Print ``line`` on stderr, above the progress line (which is redrawn below it)."""
        ...

    def __enter__(self) -> Progress: ...

    def __exit__(self, *exc: object) -> None: ...


class NoProgress:
    """Shows nothing: stderr is not a terminal."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream

    def state(self, state: str) -> None:
        pass

    def say(self, line: str) -> None:
        print(line, file=self.stream if self.stream is not None else sys.stderr, flush=True)

    def __enter__(self) -> NoProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


class ProgressLine:
    """Redraws ``waiting for <agent>… <elapsed> s, <state>`` on ``stream`` until the block ends."""

    def __init__(self, agent: str, stream: TextIO, *, state: str = "sent") -> None:
        self.agent = agent
        self.stream = stream
        self._state = state
        self._started = time.monotonic()
        self._ticker: asyncio.Task[None] | None = None

    def state(self, state: str) -> None:
        self._state = state
        self._draw()

    def say(self, line: str) -> None:
        # Erase the progress first: a line written after it would be glued to its end.
        self.stream.write(f"{_ERASE}{line}\n")
        self._draw()

    def text(self) -> str:
        return f"waiting for {self.agent}… {time.monotonic() - self._started:.1f} s, {self._state}"

    def _draw(self) -> None:
        self.stream.write(_ERASE + self.text())
        self.stream.flush()

    async def _tick(self) -> None:
        while True:
            self._draw()
            await asyncio.sleep(TICK_S)

    def __enter__(self) -> ProgressLine:
        self._started = time.monotonic()
        self._ticker = asyncio.get_running_loop().create_task(self._tick())
        return self

    def __exit__(self, *exc: object) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
        with contextlib.suppress(OSError, ValueError):  # a closed terminal: nothing left to erase
            self.stream.write(_ERASE)
            self.stream.flush()


def progress_line(agent: str, stream: TextIO | None = None) -> Progress:
    """A :class:`ProgressLine` on ``stream`` (stderr) if it is a terminal, else :class:`NoProgress`."""
    stream = stream if stream is not None else sys.stderr
    try:
        terminal = stream.isatty()
    except ValueError:  # closed
        terminal = False
    return ProgressLine(agent, stream) if terminal else NoProgress(stream)
