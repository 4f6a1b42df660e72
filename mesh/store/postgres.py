"""The PostgreSQL engine of :mod:`mesh.store`: connections, migrations, the doctor's check.

psycopg 3 (the ``postgres`` extra), imported only here and only when a store names PostgreSQL.
Migrations run on a plain (blocking) connection, as the components open their stores off the
event loop; the hot path uses an async pool (:func:`open_pool`).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from typing import TYPE_CHECKING

from mesh.errors import ConfigError
from mesh.store import Migration, StoreUrl

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import AsyncConnectionPool

__all__ = ["check", "connect", "migrate", "open_pool", "require_driver"]

_SCHEMA_TABLE = """
CREATE TABLE IF NOT EXISTS mesh_schema (
    component TEXT PRIMARY KEY,
    version INTEGER NOT NULL,
    applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
)
"""
# One lock for every component's migrations: two replicas starting together apply each step once.
_MIGRATION_LOCK = 0x6D657368  # "mesh"
#: Seconds a connection attempt may take before the store is reported unreachable.
CONNECT_TIMEOUT_S = 5


def require_driver() -> None:
    """ConfigError saying how to install psycopg when it is missing."""
    if importlib.util.find_spec("psycopg") is None or importlib.util.find_spec("psycopg_pool") is None:
        raise ConfigError(
            "a postgresql:// store needs the PostgreSQL driver; install it with "
            "`pip install 'mqtt-agent-mesh[postgres]'` (psycopg 3 and psycopg_pool)"
        )


def connect(url: StoreUrl) -> psycopg.Connection:
    """A blocking connection (autocommit), for migrations and loading."""
    require_driver()
    import psycopg

    return psycopg.connect(url.conninfo(), autocommit=True, connect_timeout=CONNECT_TIMEOUT_S)


def migrate(db: psycopg.Connection, component: str, migrations: Sequence[Migration]) -> int:
    """Apply the steps of ``migrations`` newer than what ``component`` has; its version after.

    Each step runs in a transaction of its own with its version recorded, so a start that dies
    halfway leaves the store at a known version; a store newer than this code is refused.
    """
    with db.transaction():
        db.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
        db.execute(_SCHEMA_TABLE)
        row = db.execute("SELECT version FROM mesh_schema WHERE component = %s", (component,)).fetchone()
        current = int(row[0]) if row is not None else 0
        latest = max((m.version for m in migrations), default=0)
        if current > latest:
            raise ConfigError(
                f"the store's {component} schema is at version {current}, newer than this mesh knows ({latest}); "
                "upgrade the mesh on this host to the version the other hosts run"
            )
        for step in sorted(migrations, key=lambda m: m.version):
            if step.version <= current:
                continue
            for statement in step.statements:
                db.execute(statement)
            db.execute(
                "INSERT INTO mesh_schema (component, version) VALUES (%s, %s) "
                "ON CONFLICT (component) DO UPDATE SET version = excluded.version, applied_at = now()",
                (component, step.version),
            )
            current = step.version
    return current


async def open_pool(url: StoreUrl, *, max_size: int = 4) -> AsyncConnectionPool:
    """An open async pool of autocommit connections to the store."""
    require_driver()
    from psycopg_pool import AsyncConnectionPool

    pool = AsyncConnectionPool(
        url.conninfo(),
        min_size=1,
        max_size=max_size,
        kwargs={"autocommit": True, "connect_timeout": CONNECT_TIMEOUT_S},
        open=False,
        timeout=CONNECT_TIMEOUT_S * 2,
        reconnect_timeout=0,  # keep trying: a store back after an outage is used again
    )
    await pool.open(wait=False)
    return pool


def check(url: StoreUrl) -> tuple[str, dict[str, int]]:
    """The server's version and each component's schema version (``mesh doctor``); raises
    psycopg's OperationalError when the store cannot be reached."""
    with connect(url) as db:
        server = str(db.execute("SHOW server_version").fetchone()[0])  # type: ignore[index]
        table = db.execute("SELECT to_regclass('mesh_schema')").fetchone()
        versions: dict[str, int] = {}
        if table is not None and table[0] is not None:
            versions = {str(c): int(v) for c, v in db.execute("SELECT component, version FROM mesh_schema")}
        return server, versions
