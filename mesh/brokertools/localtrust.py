"""The trust of a secured ``mesh up`` and of the components that join it later.

``mesh up`` keeps, in its credentials directory (``<state dir>/up/<ns>.mosquitto/secure/credentials``,
0700, which only this machine's user can write), a signing key per component (``<name>.jwk``),
the public keys every registry trusts (``jwks.json``) and the gateways whose user tokens agents
accept (``token-issuers.txt``, one name per line). Every component of the machine's mesh gets the
same ``trust:`` (:func:`trust_settings`), whose two files its registries and token verifiers
re-read when they change (:mod:`mesh.trust.store`): a component that joins later (``mesh run``,
``mesh mcp``, ``mesh acp``) adds its key and, a gateway, its name (:func:`add_components`), and
every running registry trusts its card within a second, with no restart. One that leaves for
good (a ``mesh mcp`` of a random id) takes them away again (:func:`remove_components`).

Trust comes from these files only, never from the network: a card signed by a key that is not
in ``jwks.json`` is refused however it arrives.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mesh.brokertools.brokerrules import Identity

__all__ = ["ISSUERS_FILE", "add_components", "remove_components", "trust_settings"]

#: The gateways whose user tokens the agents of a secured ``mesh up`` verify, one per line.
ISSUERS_FILE = "token-issuers.txt"


def trust_settings(keys_dir: Path) -> dict[str, Any]:
    """The ``trust:`` of every component of the secured ``mesh up`` whose keys are in ``keys_dir``."""
    return {"keys": str(keys_dir), "token_issuers_file": str(keys_dir / ISSUERS_FILE)}


def add_components(keys_dir: Path, identities: Sequence[Identity]) -> None:
    """A signing key for each of ``identities`` (kept if it has one) in the trusted keys, and the
    gateways among them in the token issuers. Clients have keys too: they sign their requests'
    caller tokens (mesh.trust.callers), never cards or user tokens."""
    from mesh.trust.issuers import add_token_issuers
    from mesh.trust.keys import generate_keys  # the JOSE library: only when keys are made

    signers = [identity.name for identity in identities if identity.kind in ("agent", "gateway", "client")]
    generate_keys(keys_dir, signers)
    add_token_issuers(keys_dir / ISSUERS_FILE, [identity.name for identity in identities if identity.kind == "gateway"])


def remove_components(keys_dir: Path, identities: Sequence[Identity]) -> None:
    """Take the keys of ``identities`` out of the trusted keys (and the gateways out of the issuers)."""
    from mesh.trust.issuers import remove_token_issuers
    from mesh.trust.keys import remove_keys

    remove_token_issuers(keys_dir / ISSUERS_FILE, [identity.name for identity in identities])
    remove_keys(keys_dir, [identity.name for identity in identities])
