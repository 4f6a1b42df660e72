"""``mesh doctor --store``: the shared store reached as a component reaches it, its versions."""

from __future__ import annotations

from mesh.brokertools.doctor import Finding
from mesh.errors import ConfigError
from mesh.store import parse_store_url

__all__ = ["store_findings"]

#: The oldest PostgreSQL the stores are tested on.
MIN_SERVER_MAJOR = 13


def store_findings(value: str) -> list[Finding]:
    """Reachability, server version and schema versions of the store ``value`` names (blocking)."""
    try:
        url = parse_store_url(value)
        from mesh.store import postgres

        postgres.require_driver()
    except ConfigError as exc:
        return [Finding("store", False, str(exc), "fix the store setting", needed=True)]
    try:
        server, versions = postgres.check(url)
    except Exception as exc:  # psycopg's OperationalError and kin: the message says why
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return [
            Finding(
                f"store {url}",
                False,
                f"unreachable: {first}",
                "agents with this store cannot start; check the host, port, database and password "
                "($MESH_STORE_PASSWORD or $MESH_STORE_PASSWORD_FILE)",
                needed=True,
            )
        ]
    major = int(server.split(".")[0]) if server.split(".")[0].isdigit() else 0
    schema = ", ".join(f"{component} v{version}" for component, version in sorted(versions.items()))
    return [
        Finding("store reachable", True, f"{url}: PostgreSQL {server}", needed=True),
        Finding(
            "store server version",
            major >= MIN_SERVER_MAJOR,
            server,
            f"PostgreSQL {MIN_SERVER_MAJOR} or newer is what the mesh is tested on",
        ),
        Finding("store schema", True, schema or "none yet (made by the first agent that starts on it)"),
    ]
