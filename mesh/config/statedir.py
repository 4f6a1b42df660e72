"""Where the mesh keeps state on this machine (task files, ``mesh up --secure``'s broker files)."""

from __future__ import annotations

import hashlib
import os
import string
from pathlib import Path

__all__ = ["STATE_DIR_ENV", "default_state_dir", "namespace_state_dir", "path_component"]

#: Overrides the state directory (tests point it at a temporary one).
STATE_DIR_ENV = "MESH_STATE_DIR"


def default_state_dir() -> Path:
    """``$MESH_STATE_DIR``, else ``$XDG_STATE_HOME/mesh``, else ``~/.local/state/mesh``."""
    if configured := os.environ.get(STATE_DIR_ENV):
        return Path(configured)
    state_home = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state_home) / "mesh"


_SAFE = frozenset(string.ascii_letters + string.digits + "-_")
_MAX_COMPONENT = 200  # file systems allow 255 bytes per name


def path_component(text: str) -> str:
    """``text`` as one file name, distinct for distinct texts and never ``.``, ``..`` or a path:
    letters, digits, ``-`` and ``_`` stay, any other character is percent-encoded (UTF-8), so
    ``acme/ai`` is ``acme%2Fai`` and ``acme_ai`` stays itself. A long one is cut and gets a hash
    of the whole (after ``~``, which an encoded name never holds)."""
    encoded = "".join(char if char in _SAFE else "".join(f"%{byte:02X}" for byte in char.encode()) for char in text)
    if not encoded:
        return "%"  # the empty text: no encoded text is a lone "%"
    if len(encoded) > _MAX_COMPONENT:
        encoded = f"{encoded[:100]}~{hashlib.sha256(text.encode()).hexdigest()[:32]}"
    return encoded


def namespace_state_dir(namespace: str) -> Path:
    """The directory of ``namespace``'s state under the state dir: one per namespace, inside it."""
    return default_state_dir() / path_component(namespace)
