"""Where the mesh keeps state on this machine (task files, ``mesh up --secure``'s broker files)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["STATE_DIR_ENV", "default_state_dir"]

#: Overrides the state directory (tests point it at a temporary one).
STATE_DIR_ENV = "MESH_STATE_DIR"


def default_state_dir() -> Path:
    """``$MESH_STATE_DIR``, else ``$XDG_STATE_HOME/mesh``, else ``~/.local/state/mesh``."""
    if configured := os.environ.get(STATE_DIR_ENV):
        return Path(configured)
    state_home = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state_home) / "mesh"
