"""Wiring a replica to its agent's shared store (the service calls :func:`share_tasks` once).

Only replicas (``shared_subscription``) on a PostgreSQL store share: they answer for each
other's tasks (:mod:`agents.sharedmethods`) and take a dead one's over (:mod:`agents.takeover`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agents.journal import TaskJournal
from agents.pgjournal import PostgresJournal
from agents.sharedmethods import SharedMethods
from agents.sharedtasks import SharedTasks
from agents.takeover import Takeover

if TYPE_CHECKING:
    from agents.methods import AgentMethods
    from agents.replicas import Siblings
    from agents.settings import AgentSettings
    from mesh.telemetry.metrics import ComponentMetrics

__all__ = ["share_tasks"]


def share_tasks(
    journal: TaskJournal,
    siblings: Siblings | None,
    methods: AgentMethods,
    settings: AgentSettings,
    metrics: ComponentMetrics,
) -> Takeover | None:
    """Make ``methods`` answer from the shared store and return the replica's takeover (start it
    once connected), or None when the agent does not share its tasks."""
    if siblings is None or not isinstance(journal, PostgresJournal) or not journal.shared:
        return None
    shared = SharedTasks(journal)
    takeover = Takeover(
        shared,
        agent_name=methods.name,
        policy=settings.on_owner_lost,
        tasks=methods.tasks,
        runner=methods.runner,
        resume=methods.resume if methods.agent.resumes_tasks else None,
        metrics=metrics,
    )
    methods.shared = SharedMethods(methods, shared, takeover, siblings)
    siblings.on_gone = takeover.replica_gone
    return takeover
