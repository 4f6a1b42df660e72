"""The HTTP edge of the secured ``mesh up``: an API key of its own (DESIGN, "Secure by default").

``mesh up`` (not ``--insecure``) gives its HTTP gateways an API key: generated on the first
start, shown once in the banner, kept (0600) in ``<state dir>/up/<namespace>.api-key`` and used
again on later starts, so scripts keep working across restarts. A gateway entry that sets its
own ``auth:`` keeps it. Callers send the key as ``X-API-Key`` or ``Authorization: Bearer``; an
anonymous caller gets 401, so no user token is ever minted for one.
"""

from __future__ import annotations

import copy
import dataclasses
import secrets
from collections.abc import Mapping, Sequence
from pathlib import Path

from mesh.brokertools.upstate import up_files
from mesh.config import MeshConfig
from mesh.config.credentials import write_private_file

__all__ = [
    "API_KEY_ENV",
    "API_KEY_PRINCIPAL",
    "ApiKey",
    "api_key_file",
    "banner_lines",
    "signin_hint",
    "up_api_key",
    "with_api_key",
]

#: What the banner tells the user to set, and what the examples read the key from.
API_KEY_ENV = "MESH_API_KEY"
#: The caller the key names (a task it starts is owned by ``user:<this>``).
API_KEY_PRINCIPAL = "operator"


@dataclasses.dataclass(frozen=True, slots=True)
class ApiKey:
    """The edge's key, where it is kept, and whether this start made it (then the banner shows it)."""

    secret: str = dataclasses.field(repr=False)
    path: Path
    new: bool


def api_key_file(namespace: str, state_dir: Path | None = None) -> Path:
    """Where the API key of ``mesh up`` on ``namespace`` is kept (beside its state file)."""
    state = up_files(namespace, state_dir).state
    return state.with_name(state.stem + ".api-key")


def up_api_key(namespace: str, state_dir: Path | None = None) -> ApiKey:
    """The kept key of the namespace, or a new one written 0600."""
    path = api_key_file(namespace, state_dir)
    try:
        kept = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        kept = ""
    if kept:
        if path.stat().st_mode & 0o077:
            path.chmod(0o600)  # copied around with a looser mode: only its owner reads it
        return ApiKey(kept, path, new=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    secret = secrets.token_urlsafe(32)
    write_private_file(path, secret + "\n")
    return ApiKey(secret, path, new=True)


def with_api_key(configs: Sequence[MeshConfig], key: ApiKey) -> list[MeshConfig]:
    """``configs`` with every HTTP gateway that sets no ``auth:`` asking for ``key``."""
    auth = {
        "mode": "api_key",
        "keys": [{"name": API_KEY_PRINCIPAL, "secret": key.secret}],
        "signin_hint": signin_hint(key),
    }
    updated: list[MeshConfig] = []
    for config in configs:
        entries = config.sections.get("gateways")
        if not isinstance(entries, list):
            updated.append(config)
            continue
        changed = False
        gateways: list[object] = []
        for entry in entries:
            if isinstance(entry, Mapping) and entry.get("kind") == "http" and entry.get("auth") is None:
                entry = {**copy.deepcopy(dict(entry)), "auth": copy.deepcopy(auth)}
                changed = True
            gateways.append(entry)
        if changed:
            config = dataclasses.replace(config, sections={**config.sections, "gateways": gateways})
        updated.append(config)
    return updated


def signin_hint(key: ApiKey) -> str:
    """What the sign-in page of ``mesh up``'s gateway says about its key: the file the banner names."""
    return (
        f"mesh up keeps this gateway's API key in {key.path} (its banner says so): paste what that file holds, "
        f'e.g. from cat {key.path}; for scripts: export {API_KEY_ENV}="$(cat {key.path})"'
    )


def banner_lines(key: ApiKey) -> list[str]:
    """What the banner says about the key: the key itself only when this start made it."""
    kept = f"kept 0600 in {key.path}"
    first = f"  api key    {key.secret}  (new: shown this once; {kept})" if key.new else f"  api key    {kept}"
    return [
        first,
        f'  http auth  X-API-Key or Authorization: Bearer; in a shell: export {API_KEY_ENV}="$(cat {key.path})"',
    ]
