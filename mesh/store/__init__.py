"""Where components keep what must outlive them: one small store interface, two engines.

SQLite is the embedded default (a file per component under the state dir); PostgreSQL
(``store: postgresql://...``, the ``postgres`` extra: psycopg 3) serves meshes that span
machines. A store is named by a URL; its password comes from the URL, else from
``$MESH_STORE_PASSWORD``, else from the file ``$MESH_STORE_PASSWORD_FILE`` names (a Kubernetes
Secret mounted as a file), else from libpq's own ``PGPASSWORD`` / ``~/.pgpass``. It is never
logged: :meth:`StoreUrl.__str__` shows the URL with ``***`` for the password.

Each user of a store declares its schema as numbered migrations (:class:`Migration`), applied
on start, in order, each once (a table ``mesh_schema`` records what is applied; an advisory
lock keeps two replicas starting together from applying one twice).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from mesh.errors import ConfigError
from mesh.redaction import redact_url

__all__ = [
    "PASSWORD_ENV",
    "PASSWORD_FILE_ENV",
    "Migration",
    "StoreUrl",
    "is_postgres_url",
    "parse_store_url",
]

PASSWORD_ENV = "MESH_STORE_PASSWORD"  # noqa: S105 - the variable's name, not a password
PASSWORD_FILE_ENV = "MESH_STORE_PASSWORD_FILE"  # noqa: S105
_SCHEMES = ("postgresql", "postgres")


@dataclass(frozen=True, slots=True)
class Migration:
    """One step of a component's schema: ``version`` (1, 2, ...) and the statements that make it."""

    version: int
    statements: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class StoreUrl:
    """A PostgreSQL store's address; the password kept out of ``repr`` and ``str``."""

    url: str = field(repr=False)
    password: str | None = field(default=None, repr=False)

    def __str__(self) -> str:
        return redact_url(self.url)

    def __repr__(self) -> str:
        return f"StoreUrl({redact_url(self.url)!r})"

    def conninfo(self) -> str:
        """The libpq connection string, password included (hand it to the driver only)."""
        from psycopg.conninfo import make_conninfo

        extra = {"password": self.password} if self.password is not None else {}
        return make_conninfo(self.url, **extra)


def is_postgres_url(value: str) -> bool:
    """Whether a store setting names PostgreSQL (else it is SQLite's: a path, ``:memory:`` or '')."""
    return urlsplit(value).scheme in _SCHEMES


def parse_store_url(value: str, environ: dict[str, str] | None = None) -> StoreUrl:
    """The store ``value`` names, its password resolved (see the module doc); ConfigError if bad."""
    env = os.environ if environ is None else environ
    parts = urlsplit(value)
    if parts.scheme not in _SCHEMES:
        raise ConfigError(
            f"store {redact_url(value)!r} is not a PostgreSQL URL; write postgresql://USER@HOST:PORT/DATABASE "
            "(or leave store out for the embedded SQLite files)"
        )
    if not parts.path.strip("/") and "host=" not in parts.query:
        raise ConfigError(f"store {redact_url(value)!r} names no database; write postgresql://USER@HOST:PORT/DATABASE")
    if parts.password is not None:
        return StoreUrl(value)
    if password := env.get(PASSWORD_ENV):
        return StoreUrl(value, password)
    if file := env.get(PASSWORD_FILE_ENV):
        try:
            return StoreUrl(value, Path(file).read_text(encoding="utf-8").strip())
        except OSError as exc:
            raise ConfigError(
                f"${PASSWORD_FILE_ENV} names {file!r}, which cannot be read ({exc.strerror}); point it at the "
                "file holding the store's password"
            ) from None
    return StoreUrl(value)  # libpq may still find one (PGPASSWORD, ~/.pgpass) or need none
