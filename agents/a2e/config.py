"""The ``worker:`` key of an ``agents:`` entry: how to run a worker process.

::

    - name: shout
      worker:
        command: [node, shout.js]      # argv list; a string is split as a shell would
        cwd: workers/                  # optional, relative to the YAML file
        env: {SHOUT_LEVEL: "2"}        # optional, added to the environment
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from agents.a2e.process import WorkerCommand
from mesh.config.errors import KeyPart, check_keys, config_error

__all__ = ["WORKER_EXAMPLE", "WORKER_KEYS", "parse_worker"]

WORKER_KEYS = ("command", "cwd", "env")
WORKER_EXAMPLE = "worker: {command: [node, worker.js], cwd: workers/}"


def parse_worker(value: Any, source: Path, path: Sequence[KeyPart]) -> WorkerCommand:
    """The command of a ``worker:`` mapping; ``cwd`` is resolved against ``source``'s directory."""
    where = tuple(path)
    if not isinstance(value, Mapping):
        raise config_error(source, where, f"expected a mapping, got {value!r}", f"write it as {WORKER_EXAMPLE}")
    check_keys(value, WORKER_KEYS, source=source, path=where)
    command = value.get("command")
    if isinstance(command, str):
        try:
            command = shlex.split(command)
        except ValueError as exc:
            raise config_error(
                source, (*where, "command"), f"cannot split {command!r}: {exc}", "balance the quotes"
            ) from None
    if not (isinstance(command, list) and command and all(isinstance(a, str) and a for a in command)):
        raise config_error(
            source,
            (*where, "command"),
            f"expected a non-empty list of strings (or a command string), got {command!r}",
            "write it as command: [node, worker.js]",
        )
    cwd = value.get("cwd")
    if cwd is not None and not isinstance(cwd, str):
        raise config_error(
            source, (*where, "cwd"), f"expected a directory path, got {cwd!r}", "quote it: cwd: 'workers/'"
        )
    directory = Path(source).resolve().parent
    env = value.get("env") or {}
    if not isinstance(env, Mapping) or not all(isinstance(k, str) for k in env):
        raise config_error(
            source, (*where, "env"), f"expected a mapping, got {env!r}", 'write it as env: {NAME: "value"}'
        )
    for key, item in env.items():
        if not isinstance(item, str | int | float | bool):
            raise config_error(
                source, (*where, "env", key), f"expected a string, got {item!r}", f'quote it: {key}: "..."'
            )
    return WorkerCommand.of(command, cwd=directory / cwd if cwd else directory, env={k: str(v) for k, v in env.items()})
