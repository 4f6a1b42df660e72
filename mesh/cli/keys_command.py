"""``mesh keys``: a signing key per component and the JWKS of their public keys.

::

    mesh keys echo orchestrator http --dir keys/
    # keys/echo.jwk, keys/orchestrator.jwk, keys/http.jwk (private, mode 0600), keys/jwks.json

Point the mesh config at the directory (``trust: {keys: keys/}``): each component signs its
card with ``<name>.jwk``, and every registry and agent trusts ``jwks.json``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from mesh.cli.common import EXIT_OK, EXIT_USAGE, fail


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    keys = subparsers.add_parser(
        "keys",
        help="generate a signing key per component and the JWKS others trust",
        description=(
            "Write an EC P-256 private key (JWK, kid = the name) per component into DIR, keeping keys already "
            "there unless --force, and DIR/jwks.json with the public keys of every *.jwk in DIR."
        ),
    )
    keys.add_argument("names", nargs="+", metavar="NAME", help="agent names and gateway ids")
    keys.add_argument("--dir", type=Path, default=Path("keys"), help="where the keys go (default: ./keys)")
    keys.add_argument("--force", action="store_true", help="replace the keys of these names if they exist")
    keys.set_defaults(handler=_keys)


async def _keys(args: argparse.Namespace) -> int:
    from mesh.trust import generate_keys  # the JOSE library loads only for this command

    try:
        written = generate_keys(args.dir, args.names, overwrite=args.force)
    except ValueError as exc:
        fail(f"{exc}")
        return EXIT_USAGE
    except OSError as exc:
        fail(f"cannot write keys into {args.dir}: {exc.strerror}; check the directory's permissions")
        return EXIT_USAGE
    for path in written:
        print(path)
    return EXIT_OK
