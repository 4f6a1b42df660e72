"""Config files, their sections and errors, and where the mesh keeps state and credentials."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mesh.lazy import lazy_exports

if TYPE_CHECKING:
    from mesh.config.files import (
        DEFAULT_LOG_LEVEL,
        DEFAULT_NAMESPACE,
        LOG_LEVELS,
        MeshConfig,
        configured_broker,
        configured_tls,
        load_config,
        load_many,
    )

__all__ = [
    "DEFAULT_LOG_LEVEL",
    "DEFAULT_NAMESPACE",
    "LOG_LEVELS",
    "MeshConfig",
    "configured_broker",
    "configured_tls",
    "load_config",
    "load_many",
]

# What `mesh.config` was as one module, loaded on first use so that its submodules stay cheap.
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "DEFAULT_LOG_LEVEL": "mesh.config.files",
        "DEFAULT_NAMESPACE": "mesh.config.files",
        "LOG_LEVELS": "mesh.config.files",
        "MeshConfig": "mesh.config.files",
        "configured_broker": "mesh.config.files",
        "configured_tls": "mesh.config.files",
        "load_config": "mesh.config.files",
        "load_many": "mesh.config.files",
    },
)
