"""Mesh config files: load them, check them, build the components ``mesh run`` starts.

A file holds the core keys ``broker``, ``tls``, ``namespace`` and ``log_level`` and any number of
sections (``agents:``, ``gateways:``...). The core checks its own keys and hands each section's
entries, env-substituted but otherwise untouched, to the factory registered for that section
name under the ``mesh.sections`` entry-point group. A factory's package is imported only when
its section appears in a file, so ``mesh`` never imports ``agents`` or ``gateways`` itself.

Environment variables: ``${VAR}`` and ``${VAR:-default}`` are substituted in every string value
after YAML parsing, so a value can never change the file's structure. ``:-`` uses the default
when the variable is unset or empty, as in the shell; ``$${`` is a literal ``${``; nesting is
not supported. A value is substituted as text; the model that reads it may coerce it
(``card_interval_s: ${INTERVAL:-5}`` becomes the number 5).

A section is a list of entries; an empty one (``agents:`` alone) is an empty list and loads
nothing, and a single mapping is refused so that key paths (``agents[0].name``) stay stable.
An empty file is a valid config with no sections. Duplicate keys are refused (YAML would keep
the last one silently); mapping keys are never substituted.

``tls:`` holds the TLS options of an ``mqtts://`` broker (paths relative to the file)::

    broker: mqtts://broker.example:8883
    tls:
      ca_file: certs/ca.crt      # the CA that signed the broker's certificate
      cert: certs/client.crt     # a client certificate, for a broker that requires one
      key: certs/client.key
      insecure: false            # true: DANGEROUS, no check of the broker's certificate

Every error is a :class:`~mesh.errors.ConfigError` reading ``<file>: <key path>: <problem>;
<fix>`` (:mod:`mesh.config.errors`); building the sections is :mod:`mesh.config.sections`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from mesh.broker import TLS_OPTION_NAMES, BrokerSettings, TlsOptions, check_tls_file
from mesh.config.errors import KeyPart, check_keys, config_error, suggest, type_name, validation_error_text
from mesh.config.sections import CORE_KEYS, section_names
from mesh.errors import ConfigError, short_repr
from mesh.redaction import redact_url
from topics import validate_namespace

if TYPE_CHECKING:
    from mesh.artifacts.settings import ArtifactSettings

__all__ = [
    "DEFAULT_LOG_LEVEL",
    "DEFAULT_NAMESPACE",
    "LOG_LEVELS",
    "MeshConfig",
    "configured_broker",
    "configured_tls",
    "load_config",
    "load_many",
]

DEFAULT_NAMESPACE = "mesh"
DEFAULT_LOG_LEVEL = "info"
LOG_LEVELS = ("debug", "info", "warning", "error")


@dataclass(frozen=True, slots=True)
class MeshConfig:
    """One loaded config file; ``sections`` maps a section name to its raw entries, in file order."""

    source: Path
    broker: str | None = None
    namespace: str = DEFAULT_NAMESPACE
    log_level: str = DEFAULT_LOG_LEVEL
    sections: dict[str, list[Any]] = field(default_factory=dict)
    #: The ``tls:`` options, for an ``mqtts://`` broker (paths resolved against the file's directory).
    tls: TlsOptions | None = None
    #: The ``trust:`` mapping (keys and trusted issuers for every component; see :mod:`mesh.trust.config`).
    trust: dict[str, Any] | None = None
    #: The ``emqx:`` mapping: agents also serve the EMQX "A2A over MQTT" profile (see :mod:`mesh.profile.emqx`).
    emqx: dict[str, Any] | None = None
    #: The ``artifacts:`` store of the file's components (see :mod:`mesh.artifacts.settings`).
    artifacts: ArtifactSettings | None = None


# ---------------------------------------------------------------- loading


def load_config(path: str | os.PathLike[str], *, environ: Mapping[str, str] | None = None) -> MeshConfig:
    """Read, parse, substitute and check one config file; never imports a section's package."""
    source = Path(path)
    data = _read_yaml(source)
    if data is None:  # an empty file, or only comments
        data = {}
    if not isinstance(data, dict):
        raise config_error(
            source,
            "top level",
            f"expected a mapping of keys, got {type_name(data)}",
            "start the file with keys such as 'namespace: mesh' and 'agents:'",
        )
    names = section_names()
    check_keys(data, [*CORE_KEYS, *sorted(names)], source=source)
    data = _substitute(data, (), os.environ if environ is None else environ, source)

    sections: dict[str, list[Any]] = {}
    for name, entries in data.items():
        if name in CORE_KEYS:
            continue
        if entries is None:  # `agents:` with every entry commented out
            entries = []
        if not isinstance(entries, list):
            raise config_error(
                source,
                name,
                f"expected a list of entries, got {type_name(entries)}",
                f"write each entry as a list item starting with '- ' under '{name}:'",
            )
        sections[name] = entries
    broker = _check_broker(data.get("broker"), source)
    return MeshConfig(
        source=source,
        broker=broker,
        tls=_check_tls(data.get("tls"), broker, source),
        namespace=_check_namespace(data.get("namespace", DEFAULT_NAMESPACE), source),
        log_level=_check_log_level(data.get("log_level", DEFAULT_LOG_LEVEL), source),
        sections=sections,
        trust=_check_trust(data.get("trust"), source),
        emqx=_check_emqx(data.get("emqx"), source),
        artifacts=_check_artifacts(data.get("artifacts"), source),
    )


def load_many(paths: Iterable[str | os.PathLike[str]], *, environ: Mapping[str, str] | None = None) -> list[MeshConfig]:
    """Load several files for ``mesh run FILE...``; the same file given twice is an error."""
    seen: dict[Path, Path] = {}
    configs = []
    for path in paths:
        config = load_config(path, environ=environ)
        resolved = config.source.resolve()
        if resolved in seen:
            raise config_error(config.source, "", f"given twice (also as {seen[resolved]})", "pass each file once")
        seen[resolved] = config.source
        configs.append(config)
    return configs


def configured_broker(configs: Sequence[MeshConfig]) -> str | None:
    """The one ``broker`` the files agree on (``None`` if none sets it); disagreeing is an error."""
    first: tuple[str, MeshConfig] | None = None
    for config in configs:
        if config.broker is None:
            continue
        if first is None:
            first = (config.broker, config)
        elif config.broker != first[0]:
            raise config_error(
                config.source,
                "broker",
                f"{redact_url(config.broker)!r} differs from {redact_url(first[0])!r} in {first[1].source}",
                "components run together share one broker: set it in one file, or pass --broker",
            )
    return first[0] if first is not None else None


def configured_tls(configs: Sequence[MeshConfig]) -> TlsOptions | None:
    """The one ``tls:`` the files agree on (``None`` if none sets it); disagreeing is an error."""
    first: MeshConfig | None = None
    for config in configs:
        if config.tls is None:
            continue
        if first is None:
            first = config
        elif first.tls != config.tls:
            raise config_error(
                config.source,
                "tls",
                f"differs from the tls: of {first.source}",
                "components run together share one broker connection setup: set tls: in one file only",
            )
    return first.tls if first is not None else None


def _read_yaml(source: Path) -> Any:
    try:
        text = source.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise config_error(
            source, "", "file not found", f"check the path (relative paths start at {Path.cwd()})"
        ) from None
    except IsADirectoryError:
        raise config_error(source, "", "is a directory", "pass a YAML file such as mesh.yaml") from None
    except UnicodeDecodeError as exc:
        raise config_error(
            source, "", f"is not UTF-8 text (bad byte at offset {exc.start})", "save it as UTF-8"
        ) from None
    except OSError as exc:
        raise config_error(
            source, "", f"cannot read the file ({exc.strerror})", "check that it exists and is readable"
        ) from None
    if _FastLoader is not None:
        try:
            return yaml.load(text, Loader=_FastLoader)  # noqa: S506 - a CSafeLoader
        except yaml.YAMLError:
            pass  # read again below: the errors are worded after the Python parser's messages
    try:
        return yaml.load(text, Loader=_Loader)  # noqa: S506 - _Loader is a SafeLoader
    except _DuplicateKeyError as exc:
        raise config_error(
            source,
            _where(exc),
            exc.problem or "duplicate key",
            "YAML keeps only the last one silently; merge the two into one",
        ) from None
    except yaml.MarkedYAMLError as exc:
        problem = ", ".join(part for part in (exc.context, exc.problem) if part)
        raise config_error(
            source,
            _where(exc),
            problem or "invalid YAML",
            "fix the YAML syntax there (indentation, a space after ':', unclosed quotes or brackets)",
        ) from None
    except yaml.reader.ReaderError as exc:  # a control character: no mark, only an offset
        line = text.count("\n", 0, exc.position) + 1
        column = exc.position - text.rfind("\n", 0, exc.position)
        raise config_error(
            source,
            f"line {line}, column {column}",
            f"unacceptable character #x{exc.character:04x}",
            "remove it: YAML allows no control characters except tab and newline",
        ) from None


def _where(exc: yaml.MarkedYAMLError) -> str:
    mark = exc.problem_mark
    return f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""


class _DuplicateKeyError(yaml.MarkedYAMLError):
    def __init__(self, key: object, first: yaml.Mark, again: yaml.Mark) -> None:
        problem = f"duplicate key {key!r} (first at line {first.line + 1})"
        super().__init__(problem=problem, problem_mark=again)


class _RefuseDuplicateKeys(yaml.constructor.SafeConstructor):
    """``safe_load``'s constructor, refusing duplicate keys, which YAML would silently overwrite."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, yaml.Mark] = {}
        for key_node, _ in node.value:
            # Merge keys (<<) may legitimately repeat keys of the merged mapping.
            if isinstance(key_node, yaml.ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
                key = self.construct_object(key_node)
                if key in seen:
                    raise _DuplicateKeyError(key, seen[key], key_node.start_mark)
                seen[key] = key_node.start_mark
        return super().construct_mapping(node, deep)


class _Loader(_RefuseDuplicateKeys, yaml.SafeLoader):
    """The Python parser: its error messages are the ones reported."""


# libyaml's parser, where PyYAML has it: five times faster on a file of 1,000 agents; a file it
# refuses is read again by _Loader for the message.
_FastLoader: type[yaml.CSafeLoader] | None = None
if hasattr(yaml, "CSafeLoader"):

    class _CLoader(_RefuseDuplicateKeys, yaml.CSafeLoader):
        pass

    _FastLoader = _CLoader


# Alternatives in order: an escaped '${', a reference, then any other '${' (unclosed or nested).
_REFERENCE = re.compile(r"\$\$\{|\$\{([^{}]*)\}|\$\{")
_VARIABLE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(?::-(.*))?", re.DOTALL)


def _substitute(node: Any, path: tuple[KeyPart, ...], environ: Mapping[str, str], source: Path) -> Any:
    if isinstance(node, str):
        return _expand(node, path, environ, source) if "${" in node else node
    if isinstance(node, list):
        return [_substitute(item, (*path, index), environ, source) for index, item in enumerate(node)]
    if isinstance(node, dict):  # keys are left alone: they are names, not values
        return {key: _substitute(value, (*path, key), environ, source) for key, value in node.items()}
    return node


def _expand(text: str, path: tuple[KeyPart, ...], environ: Mapping[str, str], source: Path) -> str:
    def replace(match: re.Match[str]) -> str:
        if match[0] == "$${":
            return "${"
        body = match[1]
        parsed = _VARIABLE.fullmatch(body) if body is not None else None
        if parsed is None:
            shown = match[0] if body is not None else text[match.start() :]
            raise config_error(
                source,
                path,
                f"bad substitution {shown!r} in {text!r}",
                "write ${NAME} or ${NAME:-default} (no nesting); for a literal '${' write '$${'",
            )
        name, default = parsed[1], parsed[2]
        value = environ.get(name)
        if default is not None:
            return value or default
        if value is None:
            raise config_error(
                source,
                path,
                f"environment variable {name} is not set",
                f"export it, or write ${{{name}:-default}}",
            )
        return value

    return _REFERENCE.sub(replace, text)


def _check_broker(value: Any, source: Path) -> str | None:
    if value is None or value == "":  # `broker: ${MESH_BROKER:-}` means "not configured"
        return None
    if not isinstance(value, str):
        raise config_error(
            source, "broker", f"expected a URL string, got {short_repr(value)}", "write broker: mqtt://host:1883"
        )
    try:
        BrokerSettings.from_url(value)
    except ConfigError as exc:
        problem, _, fix = str(exc).partition("; ")
        raise config_error(source, "broker", problem, fix or "write broker: mqtt://host:1883") from None
    return value


_TLS_KEYS = {key: field for field, (_cli, key) in TLS_OPTION_NAMES.items()}
_TLS_EXAMPLE = "write tls: {ca_file: ca.crt} (keys: ca_file, cert, key, insecure)"


def _check_tls(value: Any, broker: str | None, source: Path) -> TlsOptions | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise config_error(source, "tls", f"expected a mapping, got {type_name(value)}", _TLS_EXAMPLE)
    check_keys(value, list(_TLS_KEYS), source=source, path=("tls",))
    if broker is not None and not broker.lower().startswith(("mqtts://", "ssl://")):
        raise config_error(
            source, "tls", f"TLS options for the plain broker {redact_url(broker)!r}", "make it an mqtts:// URL"
        )
    options: dict[str, Any] = {}
    for key, item in value.items():
        field = _TLS_KEYS[key]
        if field == "insecure":
            if not isinstance(item, bool):
                raise config_error(
                    source, ("tls", key), f"expected true or false, got {short_repr(item)}", "write insecure: true"
                )
            options[field] = item
            continue
        if item is None or item == "":
            continue  # `ca_file: ${CA_FILE:-}` means "not configured"
        if not isinstance(item, str):
            raise config_error(
                source, ("tls", key), f"expected a file path, got {short_repr(item)}", f"write {key}: path/to/file.pem"
            )
        path = str(source.parent / Path(item).expanduser())
        try:
            options[field] = check_tls_file(path, f"tls.{key}", field)
        except ConfigError as exc:
            problem, _, fix = str(exc).partition("; ")
            raise config_error(source, ("tls", key), problem.removeprefix(f"tls.{key} "), fix) from None
    if options.get("key_file") and not options.get("cert_file"):
        raise config_error(source, "tls.key", "a client key without its certificate", "add tls.cert")
    return TlsOptions(**options)


def _check_trust(value: Any, source: Path) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise config_error(
            source,
            "trust",
            f"expected a mapping, got {type_name(value)}",
            "write trust: {keys: keys/} (see `mesh keys`)",
        )
    from mesh.trust import TrustSettings  # checked now, loaded per component when built

    check_keys(value, list(TrustSettings.model_fields), source=source, path=("trust",))
    return value


def _check_emqx(value: Any, source: Path) -> dict[str, Any] | None:
    if value is None:
        return None
    from pydantic import ValidationError

    from mesh.config.errors import validation_error_text
    from mesh.profile.emqx import EmqxProfile

    if not isinstance(value, dict):
        raise config_error(
            source, "emqx", f"expected a mapping, got {type_name(value)}", "write emqx: {org: acme, unit: ai}"
        )
    try:
        EmqxProfile.model_validate(value)
    except ValidationError as exc:
        raise ConfigError(validation_error_text(exc, source=source, prefix=("emqx",), model=EmqxProfile)) from exc
    return value


def _check_artifacts(value: Any, source: Path) -> ArtifactSettings | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise config_error(
            source, "artifacts", f"expected a mapping, got {type_name(value)}", "write artifacts: {store: embedded}"
        )
    from pydantic import ValidationError

    from mesh.artifacts.settings import ArtifactSettings, resolve_settings

    check_keys(value, list(ArtifactSettings.model_fields), source=source, path=("artifacts",))
    try:
        return resolve_settings(value, base=source.parent)
    except ValidationError as exc:
        raise ConfigError(
            validation_error_text(exc, source=source, prefix=("artifacts",), model=ArtifactSettings)
        ) from exc


def _check_namespace(value: Any, source: Path) -> str:
    try:
        return validate_namespace(value)
    except ValueError as exc:
        problem, _, fix = str(exc).partition("; ")
        fix = fix or "use one or more non-empty '/'-separated levels such as 'acme/ai'"
        raise config_error(source, "namespace", problem, fix) from None


def _check_log_level(value: Any, source: Path) -> str:
    level = value.lower() if isinstance(value, str) else value
    if level in LOG_LEVELS:
        return level
    close = suggest(level, LOG_LEVELS)
    hint = f"did you mean {close!r}? " if close else ""
    fix = f"{hint}use one of: {', '.join(LOG_LEVELS)}"
    raise config_error(source, "log_level", f"unknown log level {short_repr(value)}", fix)
