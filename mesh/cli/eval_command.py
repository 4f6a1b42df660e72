"""``mesh eval FILE``: run an eval file's cases against the live mesh and score the answers.

Its arguments; what it does is in :mod:`mesh.evals.command`, imported when it runs.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from mesh.cli.client_commands import add_client_options


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "eval",
        help="run an eval file's cases against the mesh and score the answers",
        description="Send each case of FILE to its agent (in parallel, at most --concurrency at once), score the "
        "answers by the case's expect: (exact, contains, regex, json_schema, python, number, tools, latency, "
        "tokens, an LLM judge), print a table and exit 1 when a case fails (see docs/eval.md).",
    )
    parser.add_argument("file", type=Path, metavar="FILE", help="the eval file (YAML)")
    parser.add_argument("--agent", "-a", metavar="NAME", help="ask every case of this agent, whatever the file says")
    parser.add_argument("--repeat", "-r", type=int, default=1, metavar="N", help="run each case N times (default 1)")
    parser.add_argument(
        "--concurrency", type=int, metavar="N", help="cases in flight at once (default: the file's, else 4)"
    )
    parser.add_argument("--junit", type=Path, metavar="PATH", help="also write the results as JUnit XML")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the results as JSON (for --baseline)")
    parser.add_argument(
        "--baseline",
        type=Path,
        metavar="PATH",
        help="compare with the --json file of an earlier run: a case that passed there and fails now is a "
        "regression (exit 1)",
    )
    parser.add_argument(
        "--wait", type=float, default=3.0, metavar="S", help="seconds to wait for each agent's card (default 3)"
    )
    add_client_options(parser)
    parser.set_defaults(handler=_eval)


async def _eval(args: argparse.Namespace) -> int:
    from mesh.evals.command import evaluate

    return await evaluate(args)
