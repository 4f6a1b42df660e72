"""The ``acp:`` key of an ``agents:`` entry: how to run an ACP agent and answer its requests.

::

    - name: coder
      acp:
        command: [my-acp-agent, --stdio]   # argv list; a string is split as a shell would
        cwd: project/                      # optional, relative to the YAML file
        env: {MODEL: small}                # optional, added to the environment
        policy:                            # optional; these are the defaults
          directory: .                     # reads (and writes, if allowed) only inside; relative to cwd
          read: true
          write: false
          terminal: false                  # true: the agent may run commands (in directory)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from agents.a2e.config import parse_worker
from agents.a2e.process import WorkerCommand
from agents.acp.policy import ClientPolicy
from mesh.config.errors import KeyPart, check_keys, config_error

__all__ = ["ACP_EXAMPLE", "ACP_KEYS", "POLICY_KEYS", "parse_acp"]

ACP_KEYS = ("command", "cwd", "env", "policy")
POLICY_KEYS = ("directory", "read", "write", "terminal")
ACP_EXAMPLE = "acp: {command: [my-acp-agent, --stdio], cwd: project/}"


def parse_acp(value: Any, source: Path, path: Sequence[KeyPart]) -> tuple[WorkerCommand, ClientPolicy]:
    """The command and the client policy of an ``acp:`` mapping."""
    where = tuple(path)
    if not isinstance(value, Mapping):
        raise config_error(source, where, f"expected a mapping, got {value!r}", f"write it as {ACP_EXAMPLE}")
    check_keys(value, ACP_KEYS, source=source, path=where)
    command = parse_worker({k: v for k, v in value.items() if k != "policy"}, source, where)
    return command, _policy(value.get("policy"), command.cwd or Path(source).resolve().parent, source, where)


def _policy(value: Any, cwd: Path, source: Path, where: tuple[KeyPart, ...]) -> ClientPolicy:
    here = (*where, "policy")
    if value is None:
        return ClientPolicy(directory=cwd)
    if not isinstance(value, Mapping):
        raise config_error(source, here, f"expected a mapping, got {value!r}", "write it as policy: {write: false}")
    check_keys(value, POLICY_KEYS, source=source, path=here)
    flags: dict[str, bool] = {}
    for key in ("read", "write", "terminal"):
        flag = value.get(key, key == "read")
        if not isinstance(flag, bool):
            raise config_error(source, (*here, key), f"expected true or false, got {flag!r}", f"write {key}: false")
        flags[key] = flag
    directory = value.get("directory", ".")
    if not isinstance(directory, str):
        raise config_error(source, (*here, "directory"), f"expected a path, got {directory!r}", "quote it")
    return ClientPolicy(directory=(cwd / directory).resolve(), **flags)
