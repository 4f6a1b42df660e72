"""``mesh doctor``: check what a broker can do for the mesh (:mod:`mesh.brokertools.doctor`)."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

from mesh.broker import BrokerSettings
from mesh.cli.common import EXIT_OK, add_connection_options, client_settings, configure_logging
from mesh.config.credentials import DOCTOR_USER

#: Exit code when the mesh runs, but without some of what it would use.
EXIT_DEGRADED = 1


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    doctor = subparsers.add_parser(
        "doctor",
        help="check what a broker can do for the mesh",
        description="Connect like a component and check, one line each, what the mesh needs and uses: MQTT v5, "
        "the CONNACK capabilities, user properties, retained messages, wills, $share, no_local, persistent "
        "sessions, PUBACK 0x10, the round trip time; with --peer, the same across two nodes of a cluster; with "
        "--store, the shared task store (reachable, its PostgreSQL version, its schema). "
        "Exit 0: the mesh can run fully; 1: degraded (the warnings say how); 2: it cannot run.",
    )
    doctor.add_argument("--peer", metavar="URL", help="a second node of the same cluster, for the cross-node checks")
    doctor.add_argument(
        "--store",
        metavar="URL",
        default=os.environ.get("MESH_STORE"),
        help="a postgresql:// store the agents share, to check too (default: $MESH_STORE; the password from "
        "$MESH_STORE_PASSWORD or $MESH_STORE_PASSWORD_FILE)",
    )
    add_connection_options(doctor, namespace=False)
    doctor.set_defaults(handler=_doctor)


async def _doctor(args: argparse.Namespace) -> int:
    from mesh.brokertools.doctor import diagnose  # the MQTT client loads when the command runs

    args.client = DOCTOR_USER  # a probe user: mesh doctor's scratch topics only (mesh.brokertools.brokerrules)
    configure_logging("error")
    settings = client_settings(args)
    peer = None if args.peer is None else BrokerSettings.from_url(args.peer)
    print(f"mesh doctor: {settings.url}" + (f" and {peer.url}" if peer else ""), file=sys.stderr, flush=True)
    findings = await diagnose(settings, peer)
    if args.store:
        from mesh.store.checks import store_findings

        findings += await asyncio.to_thread(store_findings, args.store)
    for finding in findings:
        print(finding.line(), flush=True)
    if any(not f.ok and f.needed for f in findings):
        print("mesh doctor: the mesh cannot run on this broker (see FAIL)", file=sys.stderr)
        return 2
    if any(not f.ok for f in findings):
        print("mesh doctor: the mesh runs here, degraded (see warn)", file=sys.stderr)
        return EXIT_DEGRADED
    print("mesh doctor: the mesh can run fully here", file=sys.stderr)
    return EXIT_OK
