"""The ``remote:`` entry of ``agents:`` (:mod:`agents.config` calls :func:`remote_entry`)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agents.agent import Agent
from agents.remote.config import RemoteConfig, parse_remote
from mesh.config.errors import KeyPart, config_error

__all__ = ["INSTALL_HINT", "remote_entry"]

INSTALL_HINT = "install the remote extra: pip install 'mqtt-agent-mesh[remote]'"
_OTHER_KINDS = ("class", "worker", "acp", "llm", "workflow")


def remote_entry(entry: Mapping[str, Any], source: Path, here: tuple[KeyPart, ...]) -> tuple[type[Agent], RemoteConfig]:
    """The agent class and config of an entry with ``remote:``, or a ConfigError saying what to fix."""
    for other in _OTHER_KINDS:
        if other in entry:
            raise config_error(
                source, (*here, "remote"), f"an entry has either '{other}:' or 'remote:', not both", "remove one"
            )
    if not isinstance(entry.get("name"), str) or not entry.get("name"):
        raise config_error(
            source,
            (*here, "name"),
            "a remote agent needs a name (its broker identity is known before its card is fetched)",
            "add 'name: my-remote' (mesh add-remote URL writes the entry with the card's name)",
        )
    config = parse_remote(entry["remote"], source, (*here, "remote"))
    try:
        from agents.remote.agent import RemoteAgent
    except ImportError as exc:
        raise config_error(
            source, (*here, "remote"), f"remote agents need the a2a-sdk ({exc.name or exc} is missing)", INSTALL_HINT
        ) from None
    return RemoteAgent, config
