"""``mesh add-remote URL``: fetch a remote A2A agent's card, show it, and write its ``remote:`` entry.

::

    mesh add-remote https://host/.well-known/agent-card.json --file mesh.yaml
    # shows the card (name, version, skills, bindings), then adds to mesh.yaml:
    #   - name: weather
    #     remote: {card_url: https://host/.well-known/agent-card.json}

A URL without a path gets the well-known card path. ``mesh run mesh.yaml`` then serves it
(docs/remote-agents.md).
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from mesh.cli.common import EXIT_OK, EXIT_USAGE
from mesh.discovery.remote_cards import CARD_PATH, RemoteError, fetch_remote_card

__all__ = ["register"]

_NAME = re.compile(r"[^A-Za-z0-9_.-]+")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    add = subparsers.add_parser(
        "add-remote",
        help="add a remote HTTP A2A agent to a mesh file (after fetching and showing its card)",
        description=(
            "Fetch the agent card at URL with the a2a-sdk (A2A 1.0 or 0.3), show it, and append a 'remote:' "
            "entry for it to the file's agents: list (created if missing). 'mesh run FILE' then serves it."
        ),
    )
    add.add_argument("url", help="the card URL, or the agent's base URL (the well-known card path is added)")
    add.add_argument("--name", help="the agent's name on the mesh (default: the card's name, made an identifier)")
    add.add_argument("--file", type=Path, default=Path("mesh.yaml"), help="the mesh file to write (default mesh.yaml)")
    add.add_argument(
        "--bearer-env", metavar="VAR", help="authenticate with a bearer token read from this environment variable"
    )
    add.add_argument("--timeout", type=float, default=10.0, metavar="S", help="seconds to wait for the card")
    add.set_defaults(handler=_add_remote)


def card_url_of(url: str) -> str:
    """``url`` itself when it has a path, else the well-known card path under it."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise RemoteError(f"{url!r} is not an http(s) URL; give the agent card's URL, e.g. https://host{CARD_PATH}")
    return url if parts.path not in ("", "/") else url.rstrip("/") + CARD_PATH


async def _add_remote(args: argparse.Namespace) -> int:
    import os
    import sys

    import httpx

    try:
        card_url = card_url_of(args.url)
        headers = {}
        if args.bearer_env:
            headers["Authorization"] = f"Bearer {os.environ.get(args.bearer_env, '')}"
        async with httpx.AsyncClient(timeout=args.timeout, headers=headers, follow_redirects=True) as http:
            card = await fetch_remote_card(http, card_url)
    except RemoteError as exc:
        print(f"mesh add-remote: {exc}", file=sys.stderr)
        return EXIT_USAGE
    name = args.name or _NAME.sub("-", card.name).strip("-.")[:128] or "remote"
    print(f"{name}: {card.name} {card.version}: {card.description}")
    for skill in card.skills:
        print(f"  skill {skill.id}: {skill.description or skill.name}")
    for interface in card.supported_interfaces:
        print(f"  {interface.protocol_binding} {interface.protocol_version or '?'} {interface.url}")
    auth = {"type": "bearer", "token_env": args.bearer_env} if args.bearer_env else None
    try:
        written = _write_entry(args.file, name, card_url, auth)
    except ValueError as exc:
        print(f"mesh add-remote: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(f"{written}: added agent {name!r}; serve it with: mesh run {written}")
    return EXIT_OK


def _write_entry(path: Path, name: str, card_url: str, auth: dict[str, str] | None) -> Path:
    """Append the entry to ``path``'s ``agents:`` list, keeping the rest of the file as it is."""
    import yaml

    text = path.read_text(encoding="utf-8") if path.exists() else ""
    loaded: Any = yaml.safe_load(text) if text.strip() else {}
    if not isinstance(loaded, dict):
        raise ValueError(f"{path} is not a mapping of sections; fix it or name another --file")
    agents = loaded.get("agents") or []
    if not isinstance(agents, list):
        raise ValueError(f"{path}: agents: is not a list; fix it or name another --file")
    if any(isinstance(a, dict) and a.get("name") == name for a in agents):
        raise ValueError(f"{path} already has an agent named {name!r}; choose another with --name")
    remote = {"card_url": card_url, **({"auth": auth} if auth else {})}
    entry = yaml.safe_dump([{"name": name, "remote": remote}], sort_keys=False, default_flow_style=None)
    item = "".join(f"  {line}\n" for line in entry.splitlines())
    last_section = list(loaded)[-1] if loaded else None
    if "agents" not in loaded:
        text = text + ("" if not text or text.endswith("\n") else "\n") + "agents:\n" + item
    elif last_section == "agents" and agents:
        text = text + ("" if text.endswith("\n") else "\n") + item
    else:  # an empty or inner agents: list: written again (its comments are lost, the values kept)
        loaded["agents"] = [*agents, {"name": name, "remote": remote}]
        text = yaml.safe_dump(loaded, sort_keys=False)
    path.write_text(text, encoding="utf-8")
    return path
