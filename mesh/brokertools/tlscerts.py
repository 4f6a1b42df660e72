"""A private CA and a server certificate for a mesh broker, made with the ``openssl`` binary.

For ``mesh up --secure`` and ``mesh broker-config --tls-host``: the CA's certificate is what
components trust (``MESH_BROKER_CA_FILE``), the server's key and certificate go to Mosquitto.
Existing files are kept, so clients keep trusting the same CA across restarts.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from ipaddress import ip_address
from pathlib import Path

from mesh.errors import ConfigError

__all__ = ["Certificates", "ensure_certificates"]

_DAYS = "825"  # the longest validity clients accept for a server certificate


@dataclass(frozen=True, slots=True)
class Certificates:
    ca_cert: Path
    server_cert: Path
    server_key: Path


def ensure_certificates(directory: Path, hosts: Sequence[str]) -> Certificates:
    """The CA and server files in ``directory``, made when missing; ``hosts`` are the server's names."""
    certs = Certificates(directory / "ca.crt", directory / "server.crt", directory / "server.key")
    if all(path.is_file() for path in (certs.ca_cert, certs.server_cert, certs.server_key)):
        return certs
    openssl = shutil.which("openssl")
    if openssl is None:
        raise ConfigError(
            "the openssl command is needed to make the broker's TLS certificate; install it "
            "(Debian/Ubuntu: sudo apt-get install openssl) or bring your own certificate files"
        )
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = directory / "ca.key"
    curve = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    _run(openssl, "req", "-x509", *curve, "-days", "3650", "-subj", "/CN=mesh broker CA",
         "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
         "-keyout", str(ca_key), "-out", str(certs.ca_cert))  # fmt: skip
    csr = directory / "server.csr"
    _run(openssl, "req", *curve, "-subj", f"/CN={hosts[0]}", "-keyout", str(certs.server_key), "-out", str(csr))
    extensions = directory / "server.ext"
    names = ",".join(f"IP:{h}" if _is_ip(h) else f"DNS:{h}" for h in hosts)
    extensions.write_text(f"subjectAltName={names}\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n")
    _run(openssl, "x509", "-req", "-in", str(csr), "-CA", str(certs.ca_cert), "-CAkey", str(ca_key),
         "-CAcreateserial", "-days", _DAYS, "-extfile", str(extensions), "-out", str(certs.server_cert))  # fmt: skip
    for path in (ca_key, certs.server_key):
        path.chmod(0o600)
    for leftover in (csr, extensions, directory / "ca.srl"):
        leftover.unlink(missing_ok=True)
    return certs


def _run(*command: str) -> None:
    done = subprocess.run(command, capture_output=True, text=True, check=False)  # noqa: S603 - no shell
    if done.returncode != 0:
        raise ConfigError(f"openssl failed making the broker certificate ({done.stderr.strip()[-300:]}); check openssl")


def _is_ip(host: str) -> bool:
    try:
        ip_address(host)
    except ValueError:
        return False
    return True
