"""The HTTP A2A gateway: A2A 0.3 and 1.0 JSON-RPC (and SSE) for every agent of a namespace."""

from pathlib import Path

#: The config `mesh up` runs for it (the ``mesh.up`` entry point).
UP_CONFIG = Path(__file__).with_name("mesh-up.yaml")
