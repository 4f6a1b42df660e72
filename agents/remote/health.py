"""The remote's health: its card fetched again on a schedule and after a failed call.

A remote that stops answering (its card fetch fails) takes the proxy's card off the mesh, so
callers fail fast as with any gone agent, and the card returns once the remote answers again;
a changed remote card is published at once. Each change is logged once, naming the URL, the
HTTP status and the fix (:func:`agents.remote.http.describe`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

from agents.remote.http import RemoteError

if TYPE_CHECKING:
    from agents.remote.agent import RemoteAgent

log = logging.getLogger(__name__)

#: After a failed call, the card is checked again this soon (not at the next scheduled time).
RECHECK_S = 0.2


class CardWatch:
    """Keeps ``agent``'s card in step with its remote's health."""

    def __init__(self, agent: RemoteAgent) -> None:
        self.agent = agent
        self.alive = True
        self.reason: str | None = None
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self.changes = 0  # times the remote went away or came back (tests wait on it)
        #: What the mesh was last told: the card published (True), withdrawn (False), or neither yet.
        self.present: bool | None = None

    def start(self) -> None:
        if self.agent.remote_card is None:  # the runtime publishes a card; the first check clears it
            self.alive, self.reason = False, f"remote {self.agent.remote.where} has not answered yet"
        else:
            self.present = True
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"remote-health:{self.agent.name}")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def failed(self, error: RemoteError) -> None:
        """A call failed: check the card soon (a 4xx of one call says nothing of the remote's health)."""
        if error.status is None or error.status >= 500:
            self.reason = str(error)
            self._wake.set()

    async def _run(self) -> None:
        interval = self.agent.remote.health_interval_s
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), interval if self.alive else min(interval, 1.0))
            if self._wake.is_set():
                self._wake.clear()
                await asyncio.sleep(RECHECK_S)  # the burst of failures of one outage: one check
            await self.check()

    async def check(self) -> None:
        """Fetch the card once and act on the answer."""
        try:
            changed = await self.agent.refresh_card()
        except RemoteError as exc:
            if self.alive:
                self.changes += 1
                log.warning("%s: %s; its card leaves the mesh until it answers", self.agent.name, exc)
            self.alive, self.reason = False, str(exc)
            if self.present is not False:
                self.present = False
                await self._announce(False)
            return
        if not self.alive:
            self.changes += 1
            log.info("%s: remote %s answers again; its card is back", self.agent.name, self.agent.remote.where)
        self.alive, self.reason = True, None
        if changed or self.present is not True:
            self.present = True
            await self._announce(True)

    async def _announce(self, present: bool) -> None:
        announce = self.agent.announce
        if announce is None:
            return
        try:
            await announce(present)
        except Exception as exc:  # the broker is away: the reconnect republishes (or not) by state
            log.warning("%s: could not %s the card: %s", self.agent.name, "publish" if present else "clear", exc)
