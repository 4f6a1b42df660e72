"""Where and how to connect: broker settings parsed from a URL.

Accepted forms::

    mqtt://host[:port]                 plain TCP, port 1883 by default
    mqtt://user:password@host:port     with credentials (percent-encode special characters)
    mqtts://host[:port]                TLS, port 8883 by default (system CAs, or SSL_CERT_FILE)
    mqtt://host:port?keepalive=15      MQTT keepalive in seconds (default 30): a frozen
                                       component leaves the mesh within 1.5 x keepalive
    mqtts://host:8883?ca_file=ca.crt&cert=client.crt&key=client.key&insecure=1
                                       TLS options (:class:`TlsOptions`); options given
                                       apart (``--ca-file``...) override these

The URL comes from a config file, ``--broker`` or ``MESH_BROKER_URL``
(:func:`resolve_broker_url`), then the broker of the ``mesh up`` running here
(:mod:`mesh.brokertools.upstate`), defaulting to ``mqtt://localhost:1883``.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, field, replace
from urllib.parse import parse_qsl, unquote, urlsplit

from mesh.config.credentials import password_for
from mesh.errors import ConfigError
from mesh.redaction import redact_url

DEFAULT_BROKER_URL = "mqtt://localhost:1883"
BROKER_URL_ENV = "MESH_BROKER_URL"
# Five minutes: covers a broker restart or a network blip, without the broker holding the
# queue of a component that is gone for good for long.
DEFAULT_SESSION_EXPIRY_S = 300
#: MQTT keepalive: the broker drops a silent (frozen) client after 1.5 x this.
DEFAULT_KEEPALIVE_S = 30

_DEFAULT_PORTS = {"mqtt": 1883, "tcp": 1883, "mqtts": 8883, "ssl": 8883}
_TLS_SCHEMES = {"mqtts", "ssl"}


#: Each TLS option under its names: the field, the CLI option, the URL query / YAML key.
TLS_OPTION_NAMES = {
    "ca_file": ("--ca-file", "ca_file"),
    "cert_file": ("--cert", "cert"),
    "key_file": ("--key", "key"),
    "insecure": ("--insecure", "insecure"),
}


@dataclass(frozen=True, slots=True)
class TlsOptions:
    """TLS material for ``mqtts://``; all optional (system CAs are used by default)."""

    #: The CA certificate(s) (PEM) the broker's certificate must chain to, instead of the system's.
    ca_file: str | None = None
    #: A client certificate (PEM) for brokers that require one (mutual TLS), and its key.
    cert_file: str | None = None
    key_file: str | None = None
    #: DANGEROUS: no check of the broker's certificate nor of its name: anyone on the path can
    #: pose as the broker and read everything. For a throwaway test broker only.
    insecure: bool = False

    def over(self, base: TlsOptions | None) -> TlsOptions:
        """These options, with what they leave unset taken from ``base``."""
        if base is None:
            return self
        return TlsOptions(
            ca_file=self.ca_file or base.ca_file,
            cert_file=self.cert_file or base.cert_file,
            key_file=self.key_file or base.key_file,
            insecure=self.insecure or base.insecure,
        )

    @property
    def is_empty(self) -> bool:
        return self == TlsOptions()


@dataclass(frozen=True, slots=True)
class BrokerSettings:
    """Everything the transport needs to reach a broker."""

    host: str = "localhost"
    port: int = 1883
    username: str | None = None
    password: str | None = field(default=None, repr=False)  # never in a log line or a traceback
    tls: TlsOptions | None = None
    keepalive_s: int = DEFAULT_KEEPALIVE_S
    connect_timeout_s: float = 10.0
    # How long the broker keeps the session (subscriptions, QoS 1 messages queued for us)
    # after the connection is lost (DESIGN, "Delivery guarantees"): answers published while a
    # component is briefly away reach it when it returns. Each transport keeps its client id
    # for its lifetime, and a clean close ends the session at once, so only a component that
    # vanished leaves one behind, for this long. 0 = the session ends with the connection.
    session_expiry_s: int = DEFAULT_SESSION_EXPIRY_S
    reconnect_min_delay_s: float = 0.1
    reconnect_max_delay_s: float = 10.0
    # Per-component passwords (mesh.config.credentials): each component connects as its own user.
    password_file: str | None = None

    @classmethod
    def from_url(cls, url: str, *, tls: TlsOptions | None = None, **overrides: object) -> BrokerSettings:
        """Parse ``mqtt://`` / ``mqtts://`` URLs; raise :class:`ConfigError` naming the problem."""
        parts = urlsplit(url)
        url = redact_url(url)  # error messages below must not carry the password
        scheme = parts.scheme.lower()
        if "://" not in url:  # 'localhost:1884' parses as scheme 'localhost', '127.0.0.1:1884' as none
            raise ConfigError(f"broker URL {url!r} has no scheme; write it as mqtt://{url} (or mqtts:// for TLS)")
        if scheme not in _DEFAULT_PORTS:
            raise ConfigError(
                f"broker URL {url!r}: unsupported scheme {parts.scheme!r}; use mqtt://host:1883 or mqtts://host:8883"
            )
        if not parts.hostname:
            raise ConfigError(f"broker URL {url!r} has no host; write it as mqtt://host:port")
        try:
            port = parts.port or _DEFAULT_PORTS[scheme]
        except ValueError as exc:
            raise ConfigError(f"broker URL {url!r}: bad port ({exc}); use a number 1-65535") from exc
        if parts.path not in ("", "/") or parts.fragment:
            raise ConfigError(
                f"broker URL {url!r}: unexpected path; only mqtt[s]://[user:pass@]host[:port][?keepalive=S] is accepted"
            )
        keepalive_s, from_query = _query_options(url, parts.query)
        if scheme in _TLS_SCHEMES:
            tls = (tls or TlsOptions()).over(from_query)
        elif not from_query.is_empty or (tls is not None and not tls.is_empty):
            raise ConfigError(
                f"broker URL {url!r}: TLS options (CA file, client certificate, insecure) given for a plain "
                f"mqtt:// URL; use mqtts://{parts.netloc.rpartition('@')[2]} for TLS, or drop them"
            )
        else:
            tls = None
        if tls is not None and tls.key_file and not tls.cert_file:
            raise ConfigError(
                f"broker URL {url!r}: a client key (--key / key) without its certificate; give --cert too"
            )
        settings = cls(
            host=parts.hostname,
            port=port,
            username=unquote(parts.username) if parts.username else None,
            password=unquote(parts.password) if parts.password else None,
            tls=tls,
            keepalive_s=keepalive_s,
        )
        return replace(settings, **overrides) if overrides else settings  # type: ignore[arg-type]

    def for_identity(self, name: str) -> BrokerSettings:
        """The settings component ``name`` connects with: username ``name``, its password from the file.

        Unchanged without a ``password_file``, or when the URL names a user (a shared account).
        """
        if self.password_file is None or self.username is not None:
            return self
        return replace(self, username=name, password=password_for(self.password_file, name))

    @property
    def url(self) -> str:
        """The URL without credentials, safe to log and to put in agent cards."""
        scheme = "mqtts" if self.tls else "mqtt"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{scheme}://{host}:{self.port}"


_QUERY_OPTIONS = ("keepalive", *(names[1] for names in TLS_OPTION_NAMES.values()))
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off", "")


def _query_options(url: str, query: str) -> tuple[int, TlsOptions]:
    """The keepalive (seconds, 1-65535) and the TLS options of a URL's query."""
    keepalive = DEFAULT_KEEPALIVE_S
    files: dict[str, str] = {}
    insecure = False
    for name, value in parse_qsl(query, keep_blank_values=True):
        if name == "keepalive":
            if not value.isdigit() or not 1 <= int(value) <= 65535:
                raise ConfigError(f"broker URL {url!r}: keepalive={value!r}; use whole seconds from 1 to 65535")
            keepalive = int(value)
        elif name == "insecure":
            if value.lower() not in _TRUE + _FALSE:
                raise ConfigError(f"broker URL {url!r}: insecure={value!r}; write insecure=1 or leave it out")
            insecure = value.lower() in _TRUE
        elif name in _QUERY_OPTIONS:
            field = next(f for f, names in TLS_OPTION_NAMES.items() if names[1] == name)
            files[field] = check_tls_file(value, f"?{name}=", field)
        else:
            close = difflib.get_close_matches(name, _QUERY_OPTIONS, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ConfigError(
                f"broker URL {url!r}: unknown option {name!r}; {hint}the options are {', '.join(_QUERY_OPTIONS)}"
            )
    return keepalive, TlsOptions(insecure=insecure, **files)


_FILE_ROLES = {
    "ca_file": "the CA certificate (PEM) that signed the broker's certificate",
    "cert_file": "this client's certificate (PEM)",
    "key_file": "the private key (PEM) of the client certificate",
}


def check_tls_file(path: str, option: str, field: str) -> str:
    """``path`` if it names a readable file; else a :class:`ConfigError` naming ``option``."""
    role = _FILE_ROLES[field]
    if not path:
        raise ConfigError(f"{option}: empty path; give the path of {role}")
    if not os.path.exists(path):
        raise ConfigError(f"{option} {path}: file not found; give the path of {role}")
    if not os.path.isfile(path):
        raise ConfigError(f"{option} {path}: not a file; give the path of {role}")
    if not os.access(path, os.R_OK):
        raise ConfigError(f"{option} {path}: not readable by this user; check its owner and mode (chmod/chown)")
    return path


def resolve_broker_url(
    explicit: str | None = None, configured: str | None = None, *, namespace: str | None = None
) -> str:
    """Pick the broker URL: ``--broker``, then ``MESH_BROKER_URL``, then the config file, then the
    broker of the ``mesh up`` running ``namespace`` here (:mod:`mesh.brokertools.upstate`)."""
    return (
        explicit
        or os.environ.get(BROKER_URL_ENV)
        or configured
        or _running_up_broker_url(namespace)
        or DEFAULT_BROKER_URL
    )


def _running_up_broker_url(namespace: str | None) -> str | None:
    # Imported here: the state files' module loads subprocess and sockets, which `import mesh` need not.
    from mesh.brokertools.upstate import running_up_broker_url

    return running_up_broker_url(namespace)
