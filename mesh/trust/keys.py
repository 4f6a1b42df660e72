"""Signing keys of the mesh's components and the public keys others trust.

Each component (agent, gateway) has its own EC P-256 key pair, named by its ``kid`` = the
component's name. ``mesh keys`` writes one private JWK per component (``<name>.jwk``, mode
0600) and a JWKS of all the public keys (``jwks.json``) into one directory: the private key
stays with its component, the JWKS is what every registry and agent trusts. ES256 is what
A2A 1.0 card verifiers (a2a-sdk, PyJWT) understand everywhere.

Keys come and go while the mesh runs (``mesh run`` enrolls a component, a short-lived identity
is withdrawn at its exit): :func:`generate_keys` and :func:`remove_keys` hold an exclusive lock
on ``.jwks.lock`` in the directory while they list the ``*.jwk`` files and write, and write
every file atomically, so concurrent writers never lose a key and a reader never sees half a
file. Running registries pick the change up from the file (:mod:`mesh.trust.store`).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable
from pathlib import Path

from joserfc import jwk
from joserfc.errors import JoseError

from mesh.errors import ConfigError
from mesh.trust.files import locked, write_atomic
from topics import validate_identifier

__all__ = [
    "ALGORITHMS",
    "JWKS_FILE",
    "SIGNING_ALGORITHM",
    "PrivateKey",
    "generate_keys",
    "load_private_key",
    "load_public_keys",
    "parse_public_keys",
    "private_key_path",
    "remove_keys",
]

#: What the mesh signs with, and what it accepts (RFC 9864's Ed25519 for keys made elsewhere).
SIGNING_ALGORITHM = "ES256"
ALGORITHMS = ("ES256", "Ed25519")
JWKS_FILE = "jwks.json"
#: What writers of a keys directory lock (flock) while they change it.
LOCK_FILE = ".jwks.lock"

PrivateKey = jwk.ECKey | jwk.OKPKey


def private_key_path(directory: Path, name: str) -> Path:
    """Where ``mesh keys`` puts the private key of component ``name``."""
    return directory / f"{name}.jwk"


def generate_keys(directory: Path, names: Iterable[str], *, overwrite: bool = False) -> list[Path]:
    """Write a private key per name (kept if present, unless ``overwrite``) and the JWKS of all keys there.

    The JWKS lists the public half of every ``*.jwk`` in ``directory``, so running the
    command again for a new component adds it without replacing the others' keys.
    """
    names = [validate_identifier(name, "component name") for name in names]  # all checked before any is written
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    with locked(directory / LOCK_FILE):
        for name in names:
            path = private_key_path(directory, name)
            if path.exists() and not overwrite:
                continue
            key = jwk.ECKey.generate_key("P-256", parameters={"kid": name, "alg": SIGNING_ALGORITHM}, private=True)
            write_atomic(path, json.dumps(key.as_dict(private=True), indent=2) + "\n", mode=0o600)
            written.append(path)
        written.append(_write_jwks(directory))
    return written


def remove_keys(directory: Path, names: Iterable[str]) -> list[Path]:
    """Delete the private keys of ``names`` (those present) and write the JWKS of the keys left.

    What withdraws a short-lived identity: registries watching the JWKS drop its card.
    Returns the key files removed.
    """
    names = [validate_identifier(name, "component name") for name in names]
    removed: list[Path] = []
    if not directory.is_dir():
        return removed
    with locked(directory / LOCK_FILE):
        for name in names:
            path = private_key_path(directory, name)
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
                removed.append(path)
        _write_jwks(directory)
    return removed


def _write_jwks(directory: Path) -> Path:
    """The JWKS of every private key in ``directory``; the caller holds its lock."""
    public = [load_private_key(path).as_dict(private=False) for path in sorted(directory.glob("*.jwk"))]
    jwks = directory / JWKS_FILE
    write_atomic(jwks, json.dumps({"keys": public}, indent=2) + "\n")
    return jwks


def load_private_key(path: Path, *, kid: str | None = None) -> PrivateKey:
    """A private key from a JWK (JSON) or PEM file; ``kid`` names a PEM key (default: the file's stem)."""
    text = _read(path, "private key")
    try:
        key = jwk.import_key(json.loads(text)) if text.lstrip().startswith("{") else _import_pem(text, kid or path.stem)
    except (ValueError, JoseError) as exc:
        raise ConfigError(f"{path}: not a private key ({exc}); make one with `mesh keys`") from None
    if not isinstance(key, jwk.ECKey | jwk.OKPKey) or not key.is_private:
        raise ConfigError(f"{path}: not an EC or Ed25519 private key; make one with `mesh keys`")
    if not key.kid:
        raise ConfigError(f"{path}: the key has no 'kid'; set it to the component's name")
    return key


def _import_pem(text: str, kid: str) -> PrivateKey:
    try:
        return jwk.ECKey.import_key(text, parameters={"kid": kid})
    except (ValueError, JoseError):
        return jwk.OKPKey.import_key(text, parameters={"kid": kid})


def load_public_keys(path: Path) -> jwk.KeySet:
    """The trusted public keys of a JWKS file (``{"keys": [...]}``); private members are dropped."""
    return parse_public_keys(_read(path, "JWKS"), path)


def parse_public_keys(text: str | bytes, path: Path) -> jwk.KeySet:
    """:func:`load_public_keys` of the file ``path`` whose content is ``text``."""
    try:
        data = json.loads(text)
        keys = [jwk.import_key(entry) for entry in data["keys"]]
    except (ValueError, KeyError, TypeError, JoseError) as exc:
        raise ConfigError(f"{path}: not a JWKS ({exc!r}); use the jwks.json `mesh keys` writes") from None
    public = []
    for key in keys:
        if not isinstance(key, jwk.ECKey | jwk.OKPKey) or not key.kid:
            raise ConfigError(f"{path}: every key needs 'kid' (the component's name) and must be EC or Ed25519")
        public.append(jwk.import_key(key.as_dict(private=False)))
    return jwk.KeySet(public)


def _read(path: Path, what: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the {what} ({exc.strerror}); check the path") from None
