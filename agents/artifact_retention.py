"""Artifacts leave with their task: a task past its retention takes the versions it saved along.

The task store forgets a finished task once it is past ``task_retention_s`` (or the count and
byte bounds); :class:`ArtifactReaper` then deletes the artifact versions that task saved
(``owner_task`` and its context, in the filesystem store as in object storage). Deleting is
I/O, so it runs in the background in batches, never on the path that answers a request.
"""

from __future__ import annotations

import asyncio
import logging

from mesh.artifacts import (
    ArtifactError,
    ArtifactSettings,
    ArtifactStore,
    InvalidArtifactName,
    open_store,
    resolve_settings,
)
from mesh.artifacts.uris import validate_context_id

__all__ = ["ArtifactReaper"]

log = logging.getLogger(__name__)

# Owners deleted per trip to the store.
_BATCH = 500
# Past this many waiting owners (a store down for long), the oldest are given up: the age
# retention of the store itself still deletes them later.
_MAX_PENDING = 100_000


class ArtifactReaper:
    """Deletes, in the background, the artifacts of the tasks it is told were forgotten."""

    def __init__(self, store: ArtifactStore, agent_name: str) -> None:
        self.store = store
        self.agent_name = agent_name
        self._pending: dict[tuple[str, str], None] = {}
        self._worker: asyncio.Task[None] | None = None
        #: Versions deleted so far (for logs and tests).
        self.deleted = 0

    def forgotten(self, context_id: str, task_id: str) -> None:
        """The task left the task store: its artifacts go too (soon, off this call)."""
        try:
            validate_context_id(context_id)
        except InvalidArtifactName:
            return  # no artifact can live under such a context
        self._pending[(context_id, task_id)] = None
        if len(self._pending) > _MAX_PENDING:
            del self._pending[next(iter(self._pending))]
        if self._worker is None:
            self._worker = asyncio.get_running_loop().create_task(self._drain())

    async def _drain(self) -> None:
        try:
            while self._pending:
                batch = list(self._pending)[:_BATCH]
                for owner in batch:
                    del self._pending[owner]
                try:
                    removed = await self.store.delete_owned(batch)
                except ArtifactError as exc:
                    log.warning(
                        "agent %s: the artifacts of %d forgotten task(s) stay: %s", self.agent_name, len(batch), exc
                    )
                    continue
                except Exception:
                    log.exception("agent %s: deleting the artifacts of forgotten tasks failed", self.agent_name)
                    continue
                self.deleted += removed
                if removed:
                    log.info("agent %s: %d artifact version(s) of forgotten tasks deleted", self.agent_name, removed)
        finally:
            self._worker = None

    async def idle(self) -> None:
        """Return once every deletion asked for so far is done (before the store closes)."""
        while self._worker is not None:
            await asyncio.shield(self._worker)


def open_artifact_store(artifacts: ArtifactSettings | ArtifactStore | None, namespace: str) -> ArtifactStore:
    """An agent's artifact store: the one given, or opened from its settings (else ``MESH_ARTIFACTS``
    or the embedded store; :mod:`mesh.artifacts`)."""
    if artifacts is None or isinstance(artifacts, ArtifactSettings):
        return open_store(resolve_settings(artifacts), namespace)
    return artifacts
