"""The cards a registry refused: counted, remembered by name (bounded), told to listeners, and
logged once a minute per name and reason (a fuzzer sends thousands)."""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable

from mesh.discovery.entries import Kind
from mesh.errors import short_repr

__all__ = [
    "BAD_CARD_LOG_INTERVAL_S",
    "MAX_HELD_BYTES",
    "MAX_HELD_CARDS",
    "HeldCards",
    "RefusalListener",
    "Refusals",
]

#: A refused card is logged once per name and reason per this many seconds.
BAD_CARD_LOG_INTERVAL_S = 60.0
_MAX_REMEMBERED = 10_000
#: Cards refused for trust, kept to be admitted when their key comes: at most this many names
#: and this many bytes in all (a flood of made-up names costs a bounded amount of memory).
MAX_HELD_CARDS = 1_000
MAX_HELD_BYTES = 8 << 20

#: ``(name, kind, why)``: a card of ``name`` was refused (``why``), or ``why`` None: it is no longer.
RefusalListener = Callable[[str, Kind, str | None], None]


class Refusals:
    """What ``mesh agents`` shows as refused, and what the log says of it."""

    def __init__(self, log: logging.Logger) -> None:
        self._log = log
        #: Cards refused (wrong topic, bad name, bad or missing signature), counted.
        self.count = 0
        #: The cards refused, by name: (kind, why), the latest; bounded (a flood of made-up names).
        self.by_name: dict[str, tuple[Kind, str]] = {}
        self._logged: dict[tuple[str, str], float] = {}  # (name or topic, why) -> when last logged
        self._listeners: list[RefusalListener] = []

    def add_listener(self, listener: RefusalListener) -> None:
        self._listeners.append(listener)

    def remove_listener(self, listener: RefusalListener) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    def refuse(self, name: str | None, kind: Kind, topic: str, problem: str) -> None:
        """Count a refused card, remember why, and log it once a minute per name and reason."""
        self.count += 1
        remembered = name is not None and (name in self.by_name or len(self.by_name) < _MAX_REMEMBERED)
        if name is not None and remembered and self.by_name.get(name) != (kind, problem):
            self.by_name[name] = (kind, problem)
            self._tell(name, kind, problem)
        key, now = (name or topic, problem), time.monotonic()
        last = self._logged.get(key)
        if last is not None and now - last < BAD_CARD_LOG_INTERVAL_S:
            self._log.debug("refused a card on %s again: %s", topic, problem)
            return
        if len(self._logged) >= _MAX_REMEMBERED:
            self._logged.clear()
        self._logged[key] = now
        shown = short_repr(name) if name is not None else "a card"
        self._log.warning("refused the card of %s on %s: %s", shown, topic, problem)

    def clear(self, name: str) -> None:
        """A good card of ``name`` came: it is no longer refused."""
        cleared = self.by_name.pop(name, None)
        if cleared is not None:
            self._tell(name, cleared[0], None)

    def still_refused(self, name: str, why: str) -> None:
        """A held card checked again under new keys fails for another reason: show that one."""
        refused = self.by_name.get(name)
        if refused is not None and refused[1] != why:
            self.by_name[name] = (refused[0], why)
            self._tell(name, refused[0], why)

    def _tell(self, name: str, kind: Kind, why: str | None) -> None:
        for listener in tuple(self._listeners):
            try:
                listener(name, kind, why)
            except Exception:
                self._log.exception("a refused-card listener failed")


class HeldCards:
    """Signed cards refused for trust, the latest per name, kept to admit them when their key
    comes: at most :data:`MAX_HELD_CARDS` names and :data:`MAX_HELD_BYTES` in all, oldest out."""

    def __init__(self) -> None:
        self._cards: OrderedDict[str, tuple[str, bytes]] = OrderedDict()  # name -> (topic, card)
        self._bytes = 0

    def __contains__(self, name: object) -> bool:
        return name in self._cards

    def names(self) -> list[str]:
        return list(self._cards)

    def get(self, name: str) -> tuple[str, bytes]:
        return self._cards[name]

    def hold(self, name: str, topic: str, payload: bytes) -> None:
        self.release(name)
        if len(payload) > MAX_HELD_BYTES:
            return
        self._cards[name] = (topic, payload)
        self._bytes += len(payload)
        while len(self._cards) > MAX_HELD_CARDS or self._bytes > MAX_HELD_BYTES:
            _, (_, dropped) = self._cards.popitem(last=False)
            self._bytes -= len(dropped)

    def release(self, name: str) -> None:
        held = self._cards.pop(name, None)
        if held is not None:
            self._bytes -= len(held[1])
