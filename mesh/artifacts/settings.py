"""Which store holds a namespace's artifacts: the ``artifacts:`` mapping of a config file, else
``MESH_ARTIFACTS``, else the embedded store under the state directory.

::

    artifacts:
      store: embedded               # default; or s3://bucket/prefix, gs://bucket, az://container,
                                    # or postgresql://... (files under path, the catalog in PostgreSQL)
      path: /srv/mesh/artifacts     # the embedded store's folder (default <state dir>/artifacts)
      options: {endpoint: "http://127.0.0.1:9000", region: us-east-1}   # obstore's store config
      client_options: {allow_http: true}                                 # obstore's HTTP client
      limits: {max_artifact_bytes: 1073741824, max_namespace_bytes: 21474836480, retention_days: 30,
               inline_threshold_bytes: 1000000}
      link_ttl_s: 120               # how long a gateway's signed download link lives (at most 3600)

``MESH_ARTIFACTS`` holds just the ``store`` value (``embedded``, a folder path, or a URL).
With ``store: postgresql://...`` (the URL and password as the task journal's, :mod:`mesh.store`)
the bytes are files under ``path`` and what describes them is in PostgreSQL: hosts that share
that folder (a network volume) and the database share the artifacts.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from mesh.artifacts.errors import ArtifactStoreUnavailable
from mesh.artifacts.store import ArtifactLimits, ArtifactStore
from mesh.config.statedir import default_state_dir
from mesh.errors import ConfigError
from mesh.redaction import redact_url
from mesh.store import is_postgres_url, parse_store_url

__all__ = ["ARTIFACTS_ENV", "ArtifactSettings", "open_store", "resolve_settings"]

ARTIFACTS_ENV = "MESH_ARTIFACTS"
_OBJECT_SCHEMES = ("s3://", "s3a://", "gs://", "az://", "abfs://", "abfss://", "azure://", "https://", "http://")


class ArtifactSettings(BaseModel):
    """The ``artifacts:`` keys of a config file (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    store: str = Field(
        "embedded",
        description="'embedded', an object-store URL (s3://bucket/prefix, gs://, az://), or postgresql://... "
        "(files under path, the catalog in PostgreSQL)",
    )
    path: str | None = Field(None, description="the embedded store's folder (default <state dir>/artifacts)")
    options: dict[str, str] = Field(default_factory=dict, description="obstore store config (endpoint, region...)")
    client_options: dict[str, Any] = Field(default_factory=dict, description="obstore client config (allow_http...)")
    limits: ArtifactLimits = Field(default_factory=ArtifactLimits)
    link_ttl_s: float = Field(
        120.0, gt=0, le=3600, description="lifetime of a gateway's signed download link (a bearer capability)"
    )

    @property
    def is_object_store(self) -> bool:
        return self.store.startswith(_OBJECT_SCHEMES)


def resolve_settings(
    raw: Mapping[str, Any] | ArtifactSettings | None = None,
    *,
    base: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> ArtifactSettings:
    """The settings of a component: its file's ``artifacts:`` (``path`` relative to ``base``),
    else ``MESH_ARTIFACTS``, else the embedded default."""
    if isinstance(raw, ArtifactSettings):
        return raw
    if raw is None:
        env = (os.environ if environ is None else environ).get(ARTIFACTS_ENV, "").strip()
        if not env or env == "embedded":
            return ArtifactSettings()
        if env.startswith(_OBJECT_SCHEMES) or is_postgres_url(env):
            return ArtifactSettings(store=env)
        return ArtifactSettings(path=env.removeprefix("file://"))
    settings = ArtifactSettings.model_validate(dict(raw))
    if settings.store.startswith("file://"):
        settings = settings.model_copy(update={"store": "embedded", "path": settings.store.removeprefix("file://")})
    if settings.path is not None and base is not None and not Path(settings.path).is_absolute():
        settings = settings.model_copy(update={"path": str(base / settings.path)})
    return settings


def open_store(settings: ArtifactSettings, namespace: str) -> ArtifactStore:
    """The store of ``namespace``; opening touches nothing until the first use."""
    if settings.is_object_store:
        from mesh.artifacts.objectstore import ObjectStore, open_object_store

        return ObjectStore(
            open_object_store(settings.store, settings.options, settings.client_options), namespace, settings.limits
        )
    from mesh.artifacts.filestore import FileStore

    base = Path(settings.path) if settings.path else default_state_dir() / "artifacts"
    if is_postgres_url(settings.store):
        from mesh.artifacts.pgcatalog import PostgresCatalog

        try:
            url = parse_store_url(settings.store)
        except ConfigError as exc:
            raise ArtifactStoreUnavailable(f"artifacts.store: {exc}") from None
        return FileStore(base, namespace, settings.limits, catalog=PostgresCatalog(url, namespace))
    if settings.store != "embedded":
        raise ArtifactStoreUnavailable(
            f"unknown artifact store {redact_url(settings.store)!r}; use 'embedded', an object-store URL such as "
            "s3://bucket/prefix, or a postgresql:// URL for the catalog"
        )
    return FileStore(base, namespace, settings.limits)
