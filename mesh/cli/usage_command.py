"""``mesh usage``: what the LLM agents of a namespace spent, from their usage store.

With ``--store postgresql://...`` (or ``$MESH_STORE``) it reads the record the agents whose
tasks or ``usage_store`` are in that database share, from every host (:mod:`mesh.telemetry.pgusage`).
Else it reads ``<state dir>/<namespace>/llm-usage.sqlite3`` (:mod:`mesh.telemetry.usage`), where
every LLM agent started on this host with the same state dir writes a row per model response. It
asks no agent.
"""

from __future__ import annotations

import argparse
import json
import os
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mesh.telemetry.usage import UsageRow

from mesh.cli.common import DEFAULT_NAMESPACE, NAMESPACE_ENV

_SINCE = re.compile(r"^(\d+)([smhdw])$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    usage = subparsers.add_parser(
        "usage",
        help="print the tokens and cost LLM agents spent",
        description="Print the tokens (input, output, cache) and the cost in USD (where genai-prices knows the "
        "model) the LLM agents of a namespace spent, from the PostgreSQL store they share (--store), else from the "
        "usage store in this host's state directory.",
    )
    usage.add_argument("--by", choices=("agent", "user", "model"), default="agent", help="one line per (default agent)")
    usage.add_argument(
        "--since", default="7d", metavar="AGE", help="only usage this recent: 30m, 12h, 7d, 2w (default 7d)"
    )
    usage.add_argument("--json", action="store_true", help="print a JSON list of the lines")
    usage.add_argument(
        "--namespace",
        "-n",
        metavar="NS",
        default=os.environ.get(NAMESPACE_ENV, DEFAULT_NAMESPACE),
        help=f"topic namespace (default: ${NAMESPACE_ENV}, then {DEFAULT_NAMESPACE!r})",
    )
    usage.add_argument(
        "--store",
        metavar="URL",
        default=os.environ.get("MESH_STORE", ""),
        help="the postgresql:// store the agents share (default: $MESH_STORE; none: this host's state directory; "
        "the password from $MESH_STORE_PASSWORD or $MESH_STORE_PASSWORD_FILE)",
    )
    usage.set_defaults(handler=_usage)


async def _usage(args: argparse.Namespace) -> int:
    import asyncio

    return await asyncio.to_thread(_report, args)  # a blocking read (of a file, or across the network)


def _rows(args: argparse.Namespace, since: float) -> list[UsageRow] | None:
    """The rows since ``since`` of the store ``--store`` names, else of this host's file (None: no file)."""
    from mesh.errors import ConfigError
    from mesh.store import is_postgres_url
    from mesh.telemetry.usage import SqliteUsageStore, open_usage_store, usage_path

    if args.store and not is_postgres_url(args.store):
        raise ConfigError(
            f"--store {args.store!r} is not a postgresql:// URL (leave it and $MESH_STORE unset for this host's file)"
        )
    if not args.store and not os.path.exists(usage_path(args.namespace)):
        return None
    # --store alone decides (its default is $MESH_STORE): none is this host's file.
    store = open_usage_store(args.namespace, args.store) if args.store else SqliteUsageStore(usage_path(args.namespace))
    try:
        return store.rows(since)
    except ConfigError:
        raise
    except Exception as exc:  # psycopg's OperationalError and kin: the first line says why
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ConfigError(
            f"cannot read the usage store {getattr(store, 'where', args.store)}: {first}; check its host, port, "
            "database and password ($MESH_STORE_PASSWORD or $MESH_STORE_PASSWORD_FILE): `mesh doctor --store URL`"
        ) from None
    finally:
        store.close()


def _report(args: argparse.Namespace) -> int:
    import time

    from mesh.errors import ConfigError
    from mesh.telemetry.usage import usage_path

    found = _SINCE.match(args.since)
    if found is None:
        raise ConfigError(f"--since {args.since!r}: give a number and s, m, h, d or w, e.g. --since 7d")
    since = time.time() - int(found[1]) * _UNITS[found[2]]
    rows = _rows(args, since)
    if rows is None:
        print(f"no LLM usage recorded in namespace {args.namespace!r} on this host (no {usage_path(args.namespace)})")
        return 0
    lines: dict[str, dict[str, float | int | None]] = {}
    for row in rows:
        line = lines.setdefault(
            getattr(row, args.by),
            {"requests": 0, "input_tokens": 0, "output_tokens": 0, "cache_read_tokens": 0, "cost_usd": None},
        )
        for key in ("requests", "input_tokens", "output_tokens", "cache_read_tokens"):
            line[key] = int(line[key] or 0) + getattr(row, key)
        if row.cost_usd is not None:
            line["cost_usd"] = float(line["cost_usd"] or 0.0) + row.cost_usd
    if args.json:
        print(json.dumps([{args.by: key, **line} for key, line in sorted(lines.items())], indent=2))
        return 0
    if not lines:
        print(f"no LLM usage in namespace {args.namespace!r} since {args.since} ago")
        return 0
    print(_table(args.by, lines))
    return 0


def _table(by: str, lines: dict[str, dict[str, float | int | None]]) -> str:
    head = [by.upper(), "REQUESTS", "INPUT", "OUTPUT", "CACHE READ", "COST USD"]
    body = [
        [
            key,
            str(line["requests"]),
            str(line["input_tokens"]),
            str(line["output_tokens"]),
            str(line["cache_read_tokens"]),
            "-" if line["cost_usd"] is None else f"{line['cost_usd']:.6f}",
        ]
        for key, line in sorted(lines.items())
    ]
    widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head))]
    out = []
    for r in [head, *body]:
        cells = [r[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(r[1:], widths[1:], strict=True)]
        out.append("  ".join(cells).rstrip())
    return "\n".join(out)
