"""Which task journal an agent's settings choose (DESIGN, "Stores").

- ``store: postgresql://...``: :class:`~agents.pgjournal.PostgresJournal`, the tasks of every
  instance of the agent in one database (replicas share them);
- else ``task_store``: a SQLite file (:class:`~agents.sqlitejournal.SqliteJournal`; by default
  one per agent under the state dir), or ``":memory:"`` (:class:`~agents.journal.NullJournal`).
  A replica without a shared store keeps its tasks in memory: its file would be a new one at
  every start.
"""

from __future__ import annotations

from agents.journal import MEMORY, NullJournal, TaskJournal, journal_path
from agents.settings import AgentSettings
from agents.sqlitejournal import SqliteJournal
from mesh.errors import ConfigError
from mesh.store import is_postgres_url, parse_store_url

__all__ = ["journal_where", "open_error", "open_journal"]


def open_journal(settings: AgentSettings, *, namespace: str, name: str, instance: str) -> TaskJournal:
    """The journal of instance ``instance`` of agent ``name`` (not loaded yet)."""
    replica = settings.shared_subscription
    if settings.store:
        if not is_postgres_url(settings.store):
            raise ConfigError(
                f"agent {name!r}: store must be a postgresql:// URL; for a SQLite file set task_store instead"
            )
        from agents.pgjournal import PostgresJournal
        from mesh.store.postgres import require_driver

        require_driver()
        return PostgresJournal(
            parse_store_url(settings.store),
            namespace=namespace,
            agent_name=name,
            instance=instance,
            shared=replica,
            lease_s=settings.task_lease_s,
            retention_s=settings.task_retention_s,
            receive_maximum=settings.max_unacked_requests,
        )
    task_store = settings.task_store
    if replica and not task_store:
        task_store = MEMORY
    path = journal_path(task_store, namespace, instance)
    if path is None:
        return NullJournal()
    return SqliteJournal(path, agent_name=name, receive_maximum=settings.max_unacked_requests)


def journal_where(journal: TaskJournal) -> str:
    """Where a journal keeps its tasks, as its errors and logs name it (never a password)."""
    return str(getattr(journal, "where", None) or getattr(journal, "path", None) or type(journal).__name__)


def open_error(agent: str, journal: TaskJournal, exc: Exception) -> ConfigError:
    """The start's error for a task store that cannot be opened: where it is and what to do."""
    fix = getattr(journal, "fix_hint", None) or (
        "fix the file or its directory, or set task_store to another path (':memory:' keeps tasks in memory only)"
    )
    return ConfigError(f"agent {agent!r} cannot open its task store {journal_where(journal)}: {exc}; {fix}")
