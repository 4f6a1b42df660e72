"""What a connection is subscribed to, and which handlers a delivered message goes to.

MQTT keeps one subscription per filter and session: subscribing a filter again replaces it.
So the handlers of one filter share one broker subscription, with one Subscription
Identifier; a delivered message names the identifiers it matched (each overlapping
subscription gets exactly its copy), or, on a broker without identifiers, the filters are
matched locally.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from mesh.transport.base import MessageHandler
from topics import topic_matches, validate_filter

__all__ = ["BrokerSubscription", "SubscriptionTable"]


@dataclass(eq=False, slots=True)
class BrokerSubscription:
    """One filter subscribed at the broker, with every local handler that wants it."""

    topic_filter: str
    qos: int
    no_local: bool
    identifier: int
    # Whether the handlers acknowledge the messages themselves (InboundMessage.ack).
    manual_ack: bool
    # Resolved by the first SUBACK: what subscribe() calls wait for.
    acked: asyncio.Future[None]
    handlers: list[MessageHandler] = field(default_factory=list)
    # Whether the broker's current session holds this subscription.
    confirmed: bool = False


class SubscriptionTable:
    """The broker subscriptions of one connection and the handlers behind each."""

    def __init__(self) -> None:
        self._by_filter: dict[str, BrokerSubscription] = {}
        self._by_identifier: dict[int, BrokerSubscription] = {}
        self._identifiers = itertools.count(1)
        self._awaiting_suback: dict[int, BrokerSubscription] = {}

    def add(
        self,
        topic_filter: str,
        handler: MessageHandler,
        qos: int,
        no_local: bool,
        loop: asyncio.AbstractEventLoop,
        manual_ack: bool = False,
    ) -> tuple[BrokerSubscription, bool]:
        """Register ``handler``; return its broker subscription and whether that is new.

        Raises ``ValueError`` (an ``InvalidFilterError``) for a filter MQTT refuses.
        """
        validate_filter(topic_filter)
        if no_local and topic_filter.startswith("$share/"):
            raise ValueError(f"no_local is a protocol error on a shared subscription ({topic_filter!r})")
        entry = self._by_filter.get(topic_filter)
        created = entry is None
        if entry is None:
            entry = BrokerSubscription(
                topic_filter, qos, no_local, next(self._identifiers), manual_ack, loop.create_future()
            )
            self._by_filter[topic_filter] = self._by_identifier[entry.identifier] = entry
        elif (entry.qos, entry.no_local, entry.manual_ack) != (qos, no_local, manual_ack):
            raise ValueError(
                f"{topic_filter!r} is already subscribed with qos={entry.qos}, no_local={entry.no_local}, "
                f"manual_ack={entry.manual_ack}; one connection holds one subscription per filter"
            )
        entry.handlers.append(handler)
        return entry, created

    def get(self, topic_filter: str) -> BrokerSubscription | None:
        return self._by_filter.get(topic_filter)

    def entries(self) -> list[BrokerSubscription]:
        """Every filter subscribed, in subscription order."""
        return list(self._by_filter.values())

    def drop(self, entry: BrokerSubscription, handler: MessageHandler) -> bool:
        """Remove ``handler``; True when its filter has no handler left (unsubscribe it)."""
        with contextlib.suppress(ValueError):
            entry.handlers.remove(handler)
        if entry.handlers or self._by_filter.get(entry.topic_filter) is not entry:
            return False
        del self._by_filter[entry.topic_filter]
        del self._by_identifier[entry.identifier]
        return True

    def sent(self, mid: int, entry: BrokerSubscription) -> None:
        """A SUBSCRIBE for ``entry`` went out as packet ``mid``."""
        self._awaiting_suback[mid] = entry

    def suback(self, mid: int) -> BrokerSubscription | None:
        """The subscription a SUBACK answers (None for a stale one)."""
        return self._awaiting_suback.pop(mid, None)

    def to_resubscribe(self, session_present: bool) -> list[BrokerSubscription]:
        """After a (re)connection: what the broker's session lacks and must be sent again.

        SUBACKs of the lost connection will never come, so nothing is awaited any more.
        """
        self._awaiting_suback.clear()
        missing = [e for e in self._by_filter.values() if not (session_present and e.confirmed)]
        for entry in missing:
            entry.confirmed = False
        return missing

    def entries_for(self, topic: str, identifiers: Sequence[int] | None) -> list[BrokerSubscription]:
        """The subscriptions of a delivered message: by the identifiers it carries, else by filter.

        A message the broker kept for a session of an earlier process (redelivered after a
        restart) carries that process's identifiers; one we do not know falls back to filters.
        """
        if identifiers:
            by_identifier = self._by_identifier
            found = [by_identifier[i] for i in identifiers if i in by_identifier]
            if len(found) == len(identifiers) and all(topic_matches(e.topic_filter, topic) for e in found):
                return found
        return [e for e in self._by_filter.values() if topic_matches(e.topic_filter, topic)]

    def handlers_for(self, topic: str, identifiers: Sequence[int] | None) -> Iterator[MessageHandler]:
        """The handlers of a delivered message (see :meth:`entries_for`)."""
        for entry in self.entries_for(topic, identifiers):
            yield from tuple(entry.handlers)
