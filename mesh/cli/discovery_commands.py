"""``mesh agents`` and ``mesh watch``: who is on the mesh, and what changes on its discovery topics.

Both read ``{ns}/a2a/v1/discovery/#`` through a :class:`~mesh.discovery.registry.DiscoveryRegistry` on a
plain transport of their own. Output goes to stdout, one flushed line at a time for ``watch``
(so ``mesh watch --json | jq`` shows events as they happen); diagnostics go to stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from mesh.cli.common import (
    EXIT_OK,
    add_connection_options,
    broker_is_one_node,
    card_verifier,
    client_settings,
    configure_logging,
    stopped_by_signals,
)
from mesh.cli.schedule_command import add_store_option
from mesh.timestamps import utc_iso
from topics import get_rollcall_topic, validate_namespace

# asyncio, the A2A models and the MQTT client load when a command runs, not to build mesh's parser.
if TYPE_CHECKING:
    from mesh.a2a import AgentCard
    from mesh.discovery.registry import DiscoveryRegistry, Entry, RegistryEvent
    from mesh.transport import InboundMessage

DESCRIPTION_WIDTH = 50
SKILLS_WIDTH = 40


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    agents = subparsers.add_parser(
        "agents",
        help="list the agents on the mesh",
        description="Collect the agent cards of the namespace and print them as a table: as soon as the retained "
        "cards are in, or after --wait seconds.",
    )
    agents.add_argument("--json", action="store_true", help="print a JSON list of {kind, name, lastSeen, card} objects")
    agents.add_argument(
        "--wait",
        type=float,
        default=None,
        metavar="S",
        help="collect cards for S seconds (for SAM agents that only send heartbeats); default: until the "
        f"retained cards are in, waiting up to {EMPTY_MESH_WAIT_S:g} s on an empty mesh",
    )
    agents.add_argument("--gateways", "-g", action="store_true", help="list the gateways too")
    agents.add_argument("--names", action="store_true", help="print the names alone, one a line (shell completion)")
    add_store_option(agents)  # where the next scheduled runs are read
    add_connection_options(agents)
    agents.set_defaults(handler=_agents)

    watch = subparsers.add_parser(
        "watch",
        help="print discovery events as they happen, until Ctrl-C",
        description=(
            "Print a line per change on the discovery topics (agents and gateways added, updated, removed; "
            "the cards already there first) until Ctrl-C or SIGTERM."
        ),
    )
    watch.add_argument("--json", action="store_true", help="print NDJSON, one object per event")
    watch.add_argument(
        "--raw",
        action="store_true",
        help="print every discovery message as it arrives (topic, retain, expiry, user properties)",
    )
    add_connection_options(watch)
    watch.set_defaults(handler=_watch)


# ---------------------------------------------------------------------- mesh agents

#: How long ``mesh agents`` waits for a first card on an empty mesh.
EMPTY_MESH_WAIT_S = 1.0
#: Its roll call asks for answers within this window (what a cluster's other node needs).
AGENTS_ROLLCALL_WINDOW_S = 0.5


async def _first_card(registry: DiscoveryRegistry) -> None:
    import asyncio

    arrived = asyncio.Event()

    def on_event(event: RegistryEvent) -> None:
        if event.kind == "agent":
            arrived.set()

    registry.add_listener(on_event)
    try:
        await arrived.wait()
    finally:
        registry.remove_listener(on_event)


async def _agents(args: argparse.Namespace) -> int:
    import asyncio

    from mesh.clientids import client_transport
    from mesh.discovery.registry import DiscoveryRegistry

    namespace = validate_namespace(args.namespace)
    settings = client_settings(args)
    configure_logging("warning")
    verifier = card_verifier(settings, namespace)  # under trust (a secured mesh up): signed cards only
    async with client_transport(settings) as transport:
        registry = DiscoveryRegistry(
            transport,
            namespace,
            verifier=verifier,
            rollcall_window_s=AGENTS_ROLLCALL_WINDOW_S,
            one_node=broker_is_one_node(settings),
        )
        await registry.start()
        started = time.monotonic()
        try:
            if args.wait is not None:
                await asyncio.sleep(args.wait)  # heartbeats come within their interval: collect for that long
            else:
                await registry.settled(EMPTY_MESH_WAIT_S)
                if not registry.agents():  # an empty mesh may be starting: give its cards a moment
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(_first_card(registry), EMPTY_MESH_WAIT_S - (time.monotonic() - started))
                    await registry.settled(EMPTY_MESH_WAIT_S)
        finally:
            await registry.stop()
        waited = time.monotonic() - started
    entries = registry.agents() + (registry.gateways() if args.gateways else [])
    refused = {
        name: why
        for name, (kind, why) in sorted(registry.refused.items())
        if (kind == "agent" or args.gateways) and registry.get(name) is None
    }
    if args.names:
        print("\n".join(e.name for e in entries))
        return EXIT_OK
    if not entries and not refused:
        what = "agents or gateways" if args.gateways else "agents"
        print(f"no {what} on namespace {namespace!r} at {settings.url} (waited {waited:.1f} s)", file=sys.stderr)
    replicas = {e.name: len(registry.instances(e.name)) for e in entries if e.kind == "agent"}
    if args.json:
        listed = [entry_json(e, replicas.get(e.name)) for e in entries]
        listed += [{"name": name, "refused": why} for name, why in refused.items()]
        print(json.dumps(listed, indent=2, ensure_ascii=False))
        return EXIT_OK
    if entries:
        print(agents_table(entries, now=time.time(), with_kind=args.gateways, replicas=replicas))
        from mesh.schedules.command import next_runs  # the machine's schedules (docs/schedules.md)

        agents = {e.name for e in entries if e.kind == "agent"}
        for line in await asyncio.to_thread(next_runs, namespace, agents, args.store or ""):
            print(line)
    if refused:  # cards the trust store refused: shown as such, never as agents
        print(f"refused (not signed by a trusted key of its name): {len(refused)}")
        print("\n".join(f"  {name}: {why}" for name, why in refused.items()))
    return EXIT_OK


def entry_json(entry: Entry, replicas: int | None = None) -> dict[str, Any]:
    data: dict[str, Any] = {
        "kind": entry.kind,
        "name": entry.name,
        "lastSeen": utc_iso(entry.last_seen, timespec="milliseconds"),
        "dialect": entry.dialect,
        "card": entry.card.to_wire_dict(),
    }
    if entry.profile is not None:  # a mesh agent serving the profile too: its other address
        data["profile"] = entry.profile
    if replicas:  # an agent run as replicas: how many have their instance card up
        data["replicas"] = replicas
    return data


def agents_table(
    entries: Sequence[Entry], *, now: float, with_kind: bool = False, replicas: Mapping[str, int] | None = None
) -> str:
    """Columns NAME, DESCRIPTION, SKILLS, STREAMING, LAST SEEN (KIND first with ``with_kind``),
    REPLICAS when an agent runs as replicas (their count; 1 for the others), and DIALECT when an
    EMQX profile agent is listed (``sam``: the mesh's topics; ``emqx``: ``$a2a/v1/...``; ``sam+emqx``:
    a mesh agent serving the profile too, listed once)."""
    header = ["NAME", "DESCRIPTION", "SKILLS", "STREAMING", "LAST SEEN"]
    rows = [
        [
            e.name,
            truncate(one_line(e.card.description), DESCRIPTION_WIDTH),
            skills_text(e.card, SKILLS_WIDTH),
            "yes" if e.card.capabilities.streaming else "no",
            age(now - e.last_seen),
        ]
        for e in entries
    ]
    if replicas and any(replicas.values()):
        header.insert(1, "REPLICAS")
        for entry, row in zip(entries, rows, strict=True):
            row.insert(1, str(replicas.get(entry.name) or 1) if entry.kind == "agent" else "-")
    if any(e.dialect != "sam" or e.profile is not None for e in entries):
        header.insert(1, "DIALECT")
        for entry, row in zip(entries, rows, strict=True):
            row.insert(1, "sam+emqx" if entry.profile is not None else entry.dialect)
    if with_kind:
        header.insert(0, "KIND")
        for entry, row in zip(entries, rows, strict=True):
            row.insert(0, entry.kind)
    table = [header, *rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in table)


def skills_text(card: AgentCard, width: int) -> str:
    """``id [tag,tag], id`` when that fits in ``width``; else the ids alone, truncated."""
    if not card.skills:
        return "-"
    full = ", ".join(f"{s.id} [{','.join(s.tags)}]" if s.tags else s.id for s in card.skills)
    if len(full) <= width:
        return full
    return truncate(", ".join(s.id for s in card.skills), width)


def age(seconds: float) -> str:
    s = max(0, int(seconds))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size:
            return f"{s // size}{unit} ago"
    return f"{s}s ago"


# ---------------------------------------------------------------------- mesh watch


async def _watch(args: argparse.Namespace) -> int:
    import asyncio

    from mesh.clientids import client_transport
    from mesh.discovery.registry import DiscoveryRegistry

    namespace = validate_namespace(args.namespace)
    settings = client_settings(args)
    configure_logging("warning")
    stop = asyncio.Event()
    out = LineOutput(on_closed=stop.set)

    def print_event(event: RegistryEvent) -> None:
        out.line(json.dumps(event.to_json_dict(), ensure_ascii=False) if args.json else event_line(event))

    def print_raw(message: InboundMessage) -> None:
        at = time.time()
        out.line(json.dumps(raw_json(message, at), ensure_ascii=False) if args.json else raw_line(message, at))

    async with client_transport(settings) as transport:
        registry = DiscoveryRegistry(transport, namespace, raw_listener=print_raw if args.raw else None)
        if not args.raw:
            registry.add_listener(print_event)
        else:  # the roll calls too (its own first), on their topic outside the discovery tree
            await transport.subscribe(get_rollcall_topic(namespace), print_raw)
        with stopped_by_signals(stop):
            # Said first: the cards already there come as "added" while the registry starts.
            print(f"watching {namespace!r} at {settings.url}; Ctrl-C stops", file=sys.stderr, flush=True)
            await registry.start()
            await stop.wait()
        await registry.stop()
    return EXIT_OK


class LineOutput:
    """Prints lines to stdout as they come, flushed; calls ``on_closed`` once the reader is gone."""

    def __init__(self, on_closed: Callable[[], None]) -> None:
        self.on_closed = on_closed
        self.closed = False

    def line(self, text: str) -> None:
        if self.closed:
            return
        try:
            print(text, flush=True)
        except BrokenPipeError:  # `mesh watch | head`: the reader quit, so do we
            self.closed = True
            # Point stdout at /dev/null, or Python complains again when it flushes at exit.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
            self.on_closed()


def event_line(event: RegistryEvent) -> str:
    """``14:03:07.123  added    agent    echo  Repeats what it is told (skills: echo)``."""
    head = f"{local_time(event.at)}  {event.type:<7}  {event.kind:<7}  {event.name}"
    if event.type == "removed" or event.card is None:
        return f"{head}  ({event.reason})"
    skills = ", ".join(s.id for s in event.card.skills) or "none"
    return f"{head}  {truncate(one_line(event.card.description), DESCRIPTION_WIDTH)} (skills: {skills})"


def raw_json(message: InboundMessage, at: float) -> dict[str, Any]:
    """One discovery message as ``mesh watch --raw --json`` prints it."""
    data: dict[str, Any] = {
        "time": utc_iso(at, timespec="milliseconds"),
        "topic": message.topic,
        "retain": message.retain,
        "expiry": message.properties.message_expiry_s,
        "userProperties": [list(pair) for pair in message.properties.user_properties()],
        "payloadBytes": len(message.payload),
    }
    card = parse_card(message.payload)
    if card is not None:
        data["card"] = card.to_wire_dict()
    return data


def raw_line(message: InboundMessage, at: float) -> str:
    """``time  topic  retain=1  expiry=30s  card echo (612 bytes)  source=x``."""
    expiry = message.properties.message_expiry_s
    size = len(message.payload)
    if not message.payload:
        summary = "<empty: gone>"
    elif (card := parse_card(message.payload)) is not None:
        summary = f"card {card.name} ({size} bytes)"
    elif message.topic.endswith("/rollcall"):
        from mesh.discovery.rollcall import rollcall_window

        summary = f"roll call (answers within {rollcall_window(message.payload) * 1000:g} ms)"
    else:
        summary = f"<not a card: {size} bytes>"
    fields = [
        local_time(at),
        message.topic,
        f"retain={int(message.retain)}",
        f"expiry={expiry}s" if expiry is not None else "expiry=-",
        summary,
    ]
    pairs = message.properties.user_properties()
    if pairs:
        fields.append(", ".join(f"{k}={v}" for k, v in pairs))
    return "  ".join(fields)


def parse_card(payload: bytes) -> AgentCard | None:
    from pydantic import ValidationError

    from mesh.a2a import AgentCard

    if not payload:
        return None
    try:
        return AgentCard.model_validate_json(payload)
    except ValidationError:
        return None


# ---------------------------------------------------------------------- formatting


def local_time(at: float) -> str:
    return datetime.fromtimestamp(at).strftime("%H:%M:%S.%f")[:-3]


def one_line(text: str) -> str:
    return " ".join(text.split())


def truncate(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1].rstrip() + "…"
