"""Listeners called in turn, each one's failure logged and kept from the others."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Generic, ParamSpec

__all__ = ["Fanout", "LiveInstances"]

P = ParamSpec("P")


class Fanout(Generic[P]):
    """Listeners of one kind of change (``what`` names them in the log)."""

    def __init__(self, what: str, log: logging.Logger) -> None:
        self._what = what
        self._log = log
        self._listeners: list[Callable[P, None]] = []

    def add(self, listener: Callable[P, None]) -> None:
        self._listeners.append(listener)

    def remove(self, listener: Callable[P, None]) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> None:
        for listener in tuple(self._listeners):
            try:
                listener(*args, **kwargs)
            except Exception:
                self._log.exception("%s %r failed", self._what, listener)


class LiveInstances:
    """The live replicas of each agent, from their instance cards; ``listeners(agent, instance,
    present)`` are told when one comes (True) or goes (False)."""

    def __init__(self, log: logging.Logger) -> None:
        self._live: dict[str, set[str]] = {}
        self.listeners: Fanout[[str, str, bool]] = Fanout("registry instance listener", log)

    def of(self, agent: str) -> list[str]:
        return sorted(self._live.get(agent, ()))

    def __contains__(self, agent: object) -> bool:
        return agent in self._live

    def update(self, agent: str, instance: str, present: bool) -> bool:
        """Record that ``instance`` of ``agent`` came or went; False when nothing changed."""
        live = self._live.setdefault(agent, set())
        if present == (instance in live):
            if not live:
                del self._live[agent]
            return False
        if present:
            live.add(instance)
        else:
            live.discard(instance)
            if not live:
                del self._live[agent]
        self.listeners(agent, instance, present)
        return True
