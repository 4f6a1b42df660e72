"""The bar ``mesh eval`` keeps on stderr while its cases run: ``[######----] 6/10  5 passed  1 failed``.

Drawn in place on a terminal only (erased when the run ends, so it never mixes with the table on
stdout); on a pipe or a file nothing is written.
"""

from __future__ import annotations

import sys
from typing import TextIO

from mesh.evals.runner import CaseResult

__all__ = ["ProgressBar"]

_ERASE = "\r\x1b[K"
_WIDTH = 24


class ProgressBar:
    def __init__(self, total: int, stream: TextIO | None = None) -> None:
        self.total = total
        self.stream = stream if stream is not None else sys.stderr
        self.shown = self.stream.isatty()
        self.passed = 0
        self.failed = 0

    def __enter__(self) -> ProgressBar:
        self._draw()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.shown:
            self.stream.write(_ERASE)
            self.stream.flush()

    def done(self, result: CaseResult) -> None:
        if result.passed:
            self.passed += 1
        else:
            self.failed += 1
        self._draw()

    def _draw(self) -> None:
        if not self.shown:
            return
        finished = self.passed + self.failed
        filled = _WIDTH * finished // max(self.total, 1)
        bar = "#" * filled + "-" * (_WIDTH - filled)
        failed = f"  {self.failed} failed" if self.failed else ""
        self.stream.write(f"{_ERASE}[{bar}] {finished}/{self.total}  {self.passed} passed{failed}")
        self.stream.flush()
