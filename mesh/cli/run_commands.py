"""``mesh run FILE...`` and ``mesh up``: start components and serve until Ctrl-C / SIGTERM.

Their arguments; what they do is in :mod:`mesh.cli.running`, imported when one runs (the config
loader, the broker tooling and the components are not loaded to build ``mesh``'s parser).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

from mesh.cli.common import NAMESPACE_ENV, add_connection_options
from mesh.cli.gctuning import tune_for_starting
from mesh.cli.up_assistant import add_model_option

#: The levels of ``--log-level`` (``mesh.config.LOG_LEVELS``, checked by tests/mesh/cli/test_startup.py).
LOG_LEVELS = ("debug", "info", "warning", "error")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    run = subparsers.add_parser(
        "run",
        help="run the agents and gateways described in config files",
        description="Run every agent and gateway of the given YAML files in this process until Ctrl-C.",
    )
    run.add_argument("files", nargs="+", type=Path, metavar="FILE", help="mesh config file (YAML)")
    run.add_argument("--log-level", choices=LOG_LEVELS, help="override the files' log_level")
    run.add_argument(
        "--namespace",
        "-n",
        metavar="NS",
        default=os.environ.get(NAMESPACE_ENV) or None,
        help=f"run every component on this namespace, whatever the files say (default: ${NAMESPACE_ENV}, "
        "then each file's namespace); as --broker and $MESH_BROKER_URL over the files' broker",
    )
    run.add_argument(
        "--metrics-port", type=int, metavar="PORT", help="serve Prometheus metrics at http://0.0.0.0:PORT/metrics"
    )
    add_connection_options(run, namespace=False)
    run.set_defaults(handler=_run)

    up = subparsers.add_parser(
        "up",
        help="start a local Mosquitto if needed, the example agents and the HTTP gateway",
        description=(
            "Start Mosquitto from mosquitto.conf on this machine under the mesh's rules (a broker user, a password "
            "file and a signing key per component, signed cards, user tokens; on the next free port when a broker "
            "answers at the default mqtt://localhost:1883), then run the example agents and the HTTP gateway until "
            "Ctrl-C. Other mesh commands find that broker and the CLI's credentials without flags; one mesh up per "
            "namespace. --insecure: the open mesh on the broker at --broker / $MESH_BROKER_URL."
        ),
    )
    up.add_argument(
        "--config",
        action="append",
        type=Path,
        default=[],
        metavar="FILE",
        help="also run the components of FILE (repeatable)",
    )
    up.add_argument("--log-level", choices=LOG_LEVELS, default="info")
    add_model_option(up)
    add_connection_options(
        up,
        secure_help=(
            "also encrypt: a TLS broker (mqtts://localhost:8883, or --broker mqtts://localhost:PORT) with a private CA"
        ),
        tls_insecure=False,
    )
    up.add_argument(
        "--insecure",
        dest="open_mesh",  # not the TLS options' --insecure (certificate checks), which `mesh up` has not
        action="store_true",
        help="DANGEROUS: the old open mesh: use or start a broker that takes anonymous connections, unsigned cards "
        "and no user tokens (a warning on every start)",
    )
    up.set_defaults(handler=_up)


async def _run(args: argparse.Namespace) -> int:
    with tune_for_starting():  # from before loading what it runs (mesh.cli.gctuning)
        from mesh.cli.running import run

        return await run(args)


async def _up(args: argparse.Namespace) -> int:
    with tune_for_starting():
        from mesh.cli.running import up

        return await up(args)


def mesh_command() -> str:
    """How the user can type ``mesh``: the bare name when it is on PATH, else the path they ran
    (``.venv/bin/mesh``, as the README's commands do)."""
    ran = Path(sys.argv[0])
    if ran.name != "mesh":  # python -m mesh.cli
        return "mesh" if shutil.which("mesh") else f"{Path(sys.executable).name} -m mesh.cli"
    on_path = shutil.which("mesh")
    if on_path is not None and Path(on_path).resolve() == ran.resolve():
        return "mesh"
    try:
        return os.path.relpath(ran) if not ran.is_absolute() or ran.is_relative_to(Path.cwd()) else str(ran)
    except ValueError:
        return str(ran)
