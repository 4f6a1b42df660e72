"""Who is on the mesh: cards, presence, the roll call, one live instance per name."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mesh.lazy import lazy_exports

if TYPE_CHECKING:
    from mesh.discovery.shared import LazyRegistry, RegistryLease, lease_registry, shared_registry_count

__all__ = [
    "LazyRegistry",
    "RegistryLease",
    "lease_registry",
    "shared_registry_count",
]

# What `mesh.discovery` was as one module, loaded on first use so that its submodules stay cheap.
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "LazyRegistry": "mesh.discovery.shared",
        "RegistryLease": "mesh.discovery.shared",
        "lease_registry": "mesh.discovery.shared",
        "shared_registry_count": "mesh.discovery.shared",
    },
)
