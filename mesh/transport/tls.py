"""TLS for the transport: the SSL context of :class:`~mesh.broker.TlsOptions`, and why a connect failed.

A failed connect is explained rather than answered with "is the broker running?": an untrusted
or misnamed broker certificate, a client certificate the broker wants or refuses, and a URL
whose scheme does not match the port (``mqtt://`` to a TLS listener, ``mqtts://`` to a plain
one). The last two look like a reset connection; a short probe of the port tells which it is.
"""

from __future__ import annotations

import errno
import os
import socket
import ssl

from mesh.broker import TLS_OPTION_NAMES, BrokerSettings, TlsOptions
from mesh.errors import ConfigError

__all__ = ["explain_connect_failure", "speaks_plain_mqtt", "speaks_tls", "ssl_context"]

# How long a probe of the port may take (connect, then a handshake or a CONNACK).
_PROBE_TIMEOUT_S = 2.0
# OpenSSL's verify codes for a certificate that does not name the host it was reached at.
_NAME_MISMATCH = {62, 64}  # X509_V_ERR_HOSTNAME_MISMATCH, X509_V_ERR_IP_ADDRESS_MISMATCH
# TLS alerts a broker sends about the client's certificate (OpenSSL's reason names).
_CERT_REQUIRED = ("CERTIFICATE_REQUIRED",)
_CERT_REFUSED = (
    "UNKNOWN_CA",
    "BAD_CERTIFICATE",
    "CERTIFICATE_UNKNOWN",
    "CERTIFICATE_EXPIRED",
    "CERTIFICATE_REVOKED",
    "UNSUPPORTED_CERTIFICATE",
    "DECRYPT_ERROR",
    "ACCESS_DENIED",
)
# An MQTT v5 CONNECT with an empty client id and clean start: any MQTT broker answers CONNACK.
_PROBE_CONNECT = bytes([0x10, 13, 0, 4]) + b"MQTT" + bytes([5, 0x02, 0, 10, 0, 0, 0])
_CONNACK = 0x20
_UNREACHABLE = {errno.EHOSTUNREACH, errno.ENETUNREACH}


def _option(field: str) -> str:
    cli, key = TLS_OPTION_NAMES[field]
    return f"{cli} (YAML tls.{key}, URL ?{key}=)"


def ssl_context(tls: TlsOptions) -> ssl.SSLContext:
    """The client context of ``tls``; a :class:`ConfigError` naming the option for a file that does not load."""
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    if tls.ca_file:
        try:
            # Only this CA then, as paho and mosquitto_sub do: a private CA is meant to be the one trusted.
            context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=tls.ca_file)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(
                f"{_option('ca_file')} {tls.ca_file}: cannot load it as CA certificates ({_reason(exc)}); "
                "give a PEM file holding the certificate of the CA that signed the broker's certificate"
            ) from None
    if tls.insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if tls.cert_file:
        try:
            context.load_cert_chain(tls.cert_file, tls.key_file)
        except (OSError, ssl.SSLError) as exc:
            key = f" with the key {tls.key_file}" if tls.key_file else " (no --key: the key must be in the same file)"
            raise ConfigError(
                f"{_option('cert_file')} {tls.cert_file}{key}: cannot load the client certificate ({_reason(exc)}); "
                "give the PEM certificate and its matching unencrypted private key with --cert and --key"
            ) from None
    return context


def explain_connect_failure(settings: BrokerSettings, error: BaseException | str | None) -> str:
    """Why the first connect to ``settings`` failed, and what to do; probes the port (blocking, a few s).

    ``error`` is what the connect raised, or what paho reported when the connection dropped
    before the broker's CONNACK (a string), or ``None`` when no CONNACK came in time.
    """
    url = settings.url
    head = f"cannot connect to the MQTT broker at {url}"
    text = error if isinstance(error, str) else _reason(error) if error is not None else "no CONNACK"
    tls = settings.tls
    if isinstance(error, socket.gaierror):
        return (
            f"{head}: cannot resolve host {settings.host!r} ({text}); check the host name in --broker / MESH_BROKER_URL"
        )
    if isinstance(error, ConnectionRefusedError | TimeoutError) or getattr(error, "errno", None) in _UNREACHABLE:
        return (
            f"{head}: {text}. Is it running? Start one with `mesh up`, or set --broker / MESH_BROKER_URL "
            "to where it runs."
        )
    if tls is None:
        if speaks_tls(settings.host, settings.port):
            secure = url.replace("mqtt://", "mqtts://", 1)
            return (
                f"{head}: this port speaks TLS; use mqtts:// ({secure}), with --ca-file if its certificate is "
                "signed by a private CA"
            )
        return f"{head}: {text}"
    if isinstance(error, ssl.SSLCertVerificationError):
        return _untrusted(head, settings, tls, error)
    explained = _client_certificate_problem(head, tls, text)
    if explained is None:
        # The broker's alert is lost when it closes first (EOF, reset): a second handshake hears it.
        alert = _tls_alert(settings, tls)
        explained = _client_certificate_problem(head, tls, alert) if alert else None
    if explained is not None:
        return explained
    if speaks_plain_mqtt(settings.host, settings.port):
        plain = url.replace("mqtts://", "mqtt://", 1)
        return f"{head}: this port does not speak TLS; use mqtt:// ({plain}), or the broker's TLS port"
    return f"{head}: {text}"


def _client_certificate_problem(head: str, tls: TlsOptions, text: str) -> str | None:
    upper = text.upper()
    if any(alert in upper for alert in _CERT_REQUIRED) or ("HANDSHAKE_FAILURE" in upper and not tls.cert_file):
        return (
            f"{head}: the broker requires a client certificate (mutual TLS) and got none ({text}); give one with "
            "--cert FILE --key FILE (YAML tls.cert / tls.key, URL ?cert=&key=)"
        )
    if tls.cert_file and any(alert in upper for alert in (*_CERT_REFUSED, "HANDSHAKE_FAILURE")):
        return (
            f"{head}: the broker refused the client certificate {tls.cert_file} ({text}); it must be signed by a "
            "CA the broker trusts (its cafile), be valid now, and be meant for client authentication"
        )
    return None


def _tls_alert(settings: BrokerSettings, tls: TlsOptions, timeout: float = _PROBE_TIMEOUT_S) -> str | None:
    """What the broker says in TLS to a handshake with ``tls``, before any MQTT: an alert's text, or None."""
    try:
        with (
            socket.create_connection((settings.host, settings.port), timeout=timeout) as raw,
            ssl_context(tls).wrap_socket(raw, server_hostname=settings.host) as sock,
        ):
            sock.settimeout(timeout / 2)  # TLS 1.3: a refused client certificate comes after the handshake
            sock.recv(1)
    except ssl.SSLError as exc:
        return _reason(exc) if "ALERT" in _reason(exc).upper() else None
    except (OSError, ConfigError):
        return None
    return None


def _untrusted(head: str, settings: BrokerSettings, tls: TlsOptions, error: ssl.SSLCertVerificationError) -> str:
    detail = error.verify_message or _reason(error)
    if error.verify_code in _NAME_MISMATCH:
        return (
            f"{head}: the broker's certificate is not valid for the host name {settings.host!r} ({detail}); "
            "connect with a name the certificate lists (its subjectAltName), or issue one that lists this name"
        )
    if tls.ca_file:
        trusted = f"the CA file {tls.ca_file} given with --ca-file / ca_file / MESH_BROKER_CA_FILE"
        fix = "give the CA that signed the broker's certificate instead"
    else:
        system = os.environ.get("SSL_CERT_FILE")
        trusted = f"the system's CA certificates ({'SSL_CERT_FILE=' + system if system else 'no --ca-file given'})"
        fix = "give the CA that signed it with --ca-file FILE (YAML tls.ca_file, URL ?ca_file=, or MESH_BROKER_CA_FILE)"
    return f"{head}: certificate verification failed ({detail}): its certificate is not signed by {trusted}; {fix}"


def speaks_tls(host: str, port: int, timeout: float = _PROBE_TIMEOUT_S) -> bool:
    """Whether the port answers a TLS handshake (its certificate not checked: this only asks the protocol)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with (
            socket.create_connection((host, port), timeout=timeout) as raw,
            context.wrap_socket(raw, server_hostname=host),
        ):
            return True
    except ssl.SSLError as exc:
        return "ALERT" in _reason(exc).upper()  # a TLS server that refused us, in TLS
    except OSError:
        return False


def speaks_plain_mqtt(host: str, port: int, timeout: float = _PROBE_TIMEOUT_S) -> bool:
    """Whether the port answers an MQTT CONNECT in the clear with a CONNACK."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(_PROBE_CONNECT)
            first = sock.recv(1)
            return first[:1] == bytes([_CONNACK])
    except OSError:
        return False


def _reason(exc: BaseException) -> str:
    """The error's own text, without Python's errno prefix and OpenSSL's source location."""
    if isinstance(exc, ssl.SSLError) and exc.reason:
        text = exc.args[1] if len(exc.args) > 1 and isinstance(exc.args[1], str) else str(exc)
        return text.split(" (_ssl.c")[0]
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__
