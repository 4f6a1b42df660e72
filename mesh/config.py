"""Mesh config files: load them, check them, build the components ``mesh run`` starts.

A file holds the core keys ``broker``, ``namespace`` and ``log_level`` and any number of
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

Every error is a :class:`~mesh.errors.ConfigError` reading ``<file>: <key path>: <problem>;
<fix>``. Section factories report theirs the same way with :func:`config_error`,
:func:`key_path`, :func:`check_keys` and :func:`validation_error_text`.
"""

from __future__ import annotations

import difflib
import inspect
import os
import re
import typing
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml
from pydantic import BaseModel, ValidationError

from mesh.broker import BrokerSettings
from mesh.component import BuildContext, Component, SectionFactory
from mesh.errors import ConfigError
from topics import validate_namespace

__all__ = [
    "CORE_KEYS",
    "DEFAULT_LOG_LEVEL",
    "DEFAULT_NAMESPACE",
    "KeyPart",
    "LOG_LEVELS",
    "SECTIONS_GROUP",
    "MeshConfig",
    "build_components",
    "build_many",
    "check_keys",
    "check_unique_components",
    "config_error",
    "configured_broker",
    "key_path",
    "load_config",
    "load_many",
    "section_factories",
    "section_names",
    "suggest",
    "validation_error_text",
]

SECTIONS_GROUP = "mesh.sections"
DEFAULT_NAMESPACE = "mesh"
DEFAULT_LOG_LEVEL = "info"
LOG_LEVELS = ("debug", "info", "warning", "error")
CORE_KEYS = ("broker", "namespace", "log_level")

KeyPart = str | int


@dataclass(frozen=True, slots=True)
class MeshConfig:
    """One loaded config file; ``sections`` maps a section name to its raw entries, in file order."""

    source: Path
    broker: str | None = None
    namespace: str = DEFAULT_NAMESPACE
    log_level: str = DEFAULT_LOG_LEVEL
    sections: dict[str, list[Any]] = field(default_factory=dict)


# ---------------------------------------------------------------- error helpers (public)

_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


def key_path(*parts: KeyPart) -> str:
    """``("agents", 0, "limits")`` -> ``agents[0].limits``; odd keys are quoted: ``x['a.b']``."""
    text = ""
    for part in parts:
        if isinstance(part, int):
            text += f"[{part}]"
        elif isinstance(part, str) and _PLAIN_KEY.fullmatch(part):
            text += f".{part}" if text else part
        else:
            text += f"[{part!r}]"
    return text


def config_error(source: Path | str, path: str | Sequence[KeyPart], problem: str, fix: str) -> ConfigError:
    """Build the standard ``<file>: <key path>: <problem>; <fix>`` error (path may be empty)."""
    where = path if isinstance(path, str) else key_path(*path)
    prefix = f"{source}: {where}: " if where else f"{source}: "
    return ConfigError(f"{prefix}{problem}; {fix}")


def suggest(word: object, candidates: Iterable[str]) -> str | None:
    """The candidate closest to *word* (difflib), or ``None`` when nothing is close."""
    matches = difflib.get_close_matches(str(word), list(candidates), n=1, cutoff=0.6)
    return matches[0] if matches else None


def check_keys(
    mapping: Mapping[Any, Any], allowed: Sequence[str], *, source: Path | str, path: Sequence[KeyPart] = ()
) -> None:
    """Raise for the first key of *mapping* not in *allowed*, suggesting the closest allowed key."""
    for key in mapping:
        if key not in allowed:
            close = suggest(key, allowed)
            hint = f"did you mean {close!r}? " if close else ""
            raise config_error(
                source,
                [*path, key],
                f"unknown key {key!r}",
                f"{hint}allowed keys: {', '.join(allowed)}",
            )


def validation_error_text(
    exc: ValidationError,
    *,
    source: Path | str,
    prefix: Sequence[KeyPart] = (),
    model: type[BaseModel] | None = None,
) -> str:
    """Render a pydantic ``ValidationError`` as config-error lines, one per problem.

    Each line is ``<file>: <prefix + loc>: <problem>, got <input>; <fix>``. With *model* (the
    class that was validated) unknown keys get a did-you-mean from the fields at their level
    and fixes quote the field's description. Raise it as ``ConfigError(text) from exc``.
    """
    lines = []
    for error in exc.errors(include_url=False):
        loc = tuple(error["loc"])
        path = key_path(*prefix, *loc)
        owner = _model_at(model, loc[:-1])
        hidden = _hides_input(model, owner) or any(isinstance(p, str) and _SECRET_KEY.search(p) for p in loc)
        problem, fix = _explain(error, owner, loc[-1] if loc else "", hidden)
        lines.append(str(config_error(source, path, problem, fix)))
    return "\n".join(lines)


# Keys whose values are secrets: a config error never repeats what they hold.
_SECRET_KEY = re.compile(r"(?i)(token|secret|password|passwd|credential|api_?key|keys|users|auth)")


def _hides_input(*models: type[BaseModel] | None) -> bool:
    return any(m is not None and m.model_config.get("hide_input_in_errors") for m in models)


def _explain(error: Any, owner: type[BaseModel] | None, key: KeyPart, hidden: bool) -> tuple[str, str]:
    kind, value = error["type"], error.get("input")
    if hidden or isinstance(value, dict | list | tuple):
        # Secrets may sit anywhere inside a mapping; name the shape, never the content.
        value = _Redacted(_type_name(value))
    fields = owner.model_fields if owner is not None else {}
    info = fields.get(key) if isinstance(key, str) else None
    if kind == "extra_forbidden":
        close = suggest(key, fields)
        hint = f"did you mean {close!r}? " if close else ""
        allowed = f"allowed keys: {', '.join(fields)}" if fields else "remove it"
        return f"unknown key {key!r}", hint + allowed
    if kind == "missing":
        return "required key is missing", f"add {key}: <value>"
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        sub = _model_in(info.annotation) if info is not None else None
        keys = f" of keys such as {', '.join(list(sub.model_fields)[:4])}" if sub else ""
        return f"expected a mapping, got {_shown(value)}", f"write {key} as a mapping{keys}"
    message = error["msg"][:1].lower() + error["msg"][1:]
    about = f" ({info.description})" if info is not None and info.description else ""
    return f"{message}, got {_shown(value)}", f"set {key} to a valid value{about}"


def _model_at(model: type[BaseModel] | None, loc: Sequence[KeyPart]) -> type[BaseModel] | None:
    """The model that owns the last key of *loc*; list indexes keep the current model."""
    for part in loc:
        if model is None:
            return None
        if isinstance(part, str):
            info = model.model_fields.get(part)
            model = _model_in(info.annotation) if info is not None else None
    return model


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if inspect.isclass(annotation) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


class _Redacted(str):
    """What a config error shows instead of a value it must not repeat."""

    def __repr__(self) -> str:
        return str(self)


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:56] + "..." + text[-1]


def _type_name(value: object) -> str:
    names = {dict: "a mapping", list: "a list", str: "a string", type(None): "nothing (null)"}
    return names.get(type(value), f"a {type(value).__name__}")


# ---------------------------------------------------------------- loading


def load_config(path: str | os.PathLike[str], *, environ: Mapping[str, str] | None = None) -> MeshConfig:
    """Read, parse, substitute and check one config file; never imports a section's package."""
    source = Path(path)
    data = _read_yaml(source)
    if data is None:  # an empty file, or only comments
        data = {}
    if not isinstance(data, dict):
        raise config_error(
            source, "top level", f"expected a mapping of keys, got {_type_name(data)}",
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
                source, name, f"expected a list of entries, got {_type_name(entries)}",
                f"write each entry as a list item starting with '- ' under '{name}:'",
            )
        sections[name] = entries
    return MeshConfig(
        source=source,
        broker=_check_broker(data.get("broker"), source),
        namespace=_check_namespace(data.get("namespace", DEFAULT_NAMESPACE), source),
        log_level=_check_log_level(data.get("log_level", DEFAULT_LOG_LEVEL), source),
        sections=sections,
    )


def load_many(
    paths: Iterable[str | os.PathLike[str]], *, environ: Mapping[str, str] | None = None
) -> list[MeshConfig]:
    """Load several files for ``mesh run FILE...``; the same file given twice is an error."""
    seen: dict[Path, Path] = {}
    configs = []
    for path in paths:
        config = load_config(path, environ=environ)
        resolved = config.source.resolve()
        if resolved in seen:
            raise config_error(
                config.source, "", f"given twice (also as {seen[resolved]})", "pass each file once"
            )
        seen[resolved] = config.source
        configs.append(config)
    return configs


def configured_broker(configs: Sequence[MeshConfig]) -> str | None:
    """The one ``broker`` the files agree on (``None`` if none sets it); disagreeing is an error."""
    first: MeshConfig | None = None
    for config in configs:
        if config.broker is None:
            continue
        if first is not None and config.broker != first.broker:
            raise config_error(
                config.source, "broker",
                f"{_redacted(config.broker)!r} differs from {_redacted(first.broker)!r} in {first.source}",
                "components run together share one broker: set it in one file, or pass --broker",
            )
        first = first or config
    return first.broker if first is not None else None


def _redacted(url: str | None) -> str | None:
    parts = urlsplit(url) if url else None
    if parts is None or parts.password is None:
        return url
    return parts._replace(netloc=parts.netloc.replace(f":{parts.password}@", ":***@", 1)).geturl()


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
    try:
        return yaml.load(text, Loader=_Loader)  # noqa: S506 - _Loader is a SafeLoader
    except _DuplicateKeyError as exc:
        raise config_error(
            source, _where(exc), exc.problem or "duplicate key",
            "YAML keeps only the last one silently; merge the two into one",
        ) from None
    except yaml.MarkedYAMLError as exc:
        problem = ", ".join(part for part in (exc.context, exc.problem) if part)
        raise config_error(
            source, _where(exc), problem or "invalid YAML",
            "fix the YAML syntax there (indentation, a space after ':', unclosed quotes or brackets)",
        ) from None
    except yaml.reader.ReaderError as exc:  # a control character: no mark, only an offset
        line = text.count("\n", 0, exc.position) + 1
        column = exc.position - text.rfind("\n", 0, exc.position)
        raise config_error(
            source, f"line {line}, column {column}", f"unacceptable character #x{exc.character:04x}",
            "remove it: YAML allows no control characters except tab and newline",
        ) from None


def _where(exc: yaml.MarkedYAMLError) -> str:
    mark = exc.problem_mark
    return f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""


class _DuplicateKeyError(yaml.MarkedYAMLError):
    def __init__(self, key: object, first: yaml.Mark, again: yaml.Mark) -> None:
        problem = f"duplicate key {key!r} (first at line {first.line + 1})"
        super().__init__(problem=problem, problem_mark=again)


class _Loader(yaml.SafeLoader):
    """``safe_load`` that refuses duplicate keys, which YAML would silently overwrite."""

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
            shown = match[0] if body is not None else text[match.start():]
            raise config_error(
                source, path, f"bad substitution {shown!r} in {text!r}",
                "write ${NAME} or ${NAME:-default} (no nesting); for a literal '${' write '$${'",
            )
        name, default = parsed[1], parsed[2]
        value = environ.get(name)
        if default is not None:
            return value or default
        if value is None:
            raise config_error(
                source, path, f"environment variable {name} is not set",
                f"export it, or write ${{{name}:-default}}",
            )
        return value

    return _REFERENCE.sub(replace, text)


def _check_broker(value: Any, source: Path) -> str | None:
    if value is None or value == "":  # `broker: ${MESH_BROKER:-}` means "not configured"
        return None
    if not isinstance(value, str):
        raise config_error(
            source, "broker", f"expected a URL string, got {_shown(value)}", "write broker: mqtt://host:1883"
        )
    try:
        BrokerSettings.from_url(value)
    except ConfigError as exc:
        problem, _, fix = str(exc).partition("; ")
        raise config_error(source, "broker", problem, fix or "write broker: mqtt://host:1883") from None
    return value


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
    raise config_error(source, "log_level", f"unknown log level {_shown(value)}", fix)


# ---------------------------------------------------------------- sections and building


def _section_entry_points() -> dict[str, EntryPoint]:
    """The installed ``mesh.sections`` entry points by name (not loaded); a seam for tests."""
    found: dict[str, EntryPoint] = {}
    for entry_point in entry_points(group=SECTIONS_GROUP):
        # The same distribution seen twice on sys.path: the first one wins, as for imports.
        if entry_point.name not in CORE_KEYS:
            found.setdefault(entry_point.name, entry_point)
    return found


def section_names() -> frozenset[str]:
    """Names of the installed sections; reads metadata only, imports nothing."""
    return frozenset(_section_entry_points())


def section_factories(names: Iterable[str] | None = None) -> dict[str, SectionFactory]:
    """Load the factories of the named sections (default: all installed) and only those."""
    installed = _section_entry_points()
    wanted = installed if names is None else names
    factories: dict[str, SectionFactory] = {}
    for name in wanted:
        if name not in installed:
            known = ", ".join(sorted(installed)) or "none"
            raise ConfigError(f"section {name!r} has no factory; installed sections: {known}")
        factories[name] = _load_factory(name, installed[name], SECTIONS_GROUP)
    return factories


def _load_factory(name: str, entry_point: EntryPoint, where: str | Path) -> SectionFactory:
    try:
        factory = entry_point.load()
    except ImportError as exc:
        raise config_error(
            where, name, f"cannot load the section's factory {entry_point.value} ({exc})",
            _install_hint(name, entry_point, exc),
        ) from exc
    return typing.cast(SectionFactory, factory)


def _install_hint(name: str, entry_point: EntryPoint, exc: ImportError) -> str:
    missing = (exc.name or "").split(".")[0]
    package = entry_point.value.partition(":")[0].split(".")[0]
    dist = getattr(entry_point, "dist", None)
    if missing and missing != package:  # the factory's package is there; a dependency is not
        extra = _extra_providing(dist, missing)
        if dist is not None and extra is not None:
            return f"install the {extra!r} extra: pip install '{dist.name}[{extra}]'"
        return f"install the package that provides {missing!r} (pip install {missing})"
    owner = dist.name if dist is not None else package
    return f"reinstall {owner} (pip install --force-reinstall {owner}), or remove the '{name}' section"


def _extra_providing(dist: Any, module: str) -> str | None:
    """The extra of *dist* requiring a distribution named like *module*; non-dev extras first."""
    wanted = _normalized(module)
    extras = []
    for requirement in getattr(dist, "requires", None) or []:
        found = re.match(r"\s*([A-Za-z0-9_.-]+).*;.*extra\s*==\s*['\"]([^'\"]+)['\"]", requirement)
        if found and _normalized(found[1]) == wanted:
            extras.append(found[2])
    extras.sort(key=lambda extra: extra in ("dev", "test", "tests"))
    return extras[0] if extras else None


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()  # PEP 503


def build_components(config: MeshConfig, broker: BrokerSettings) -> list[Component]:
    """Build every component of one file, importing only the factories of its non-empty sections."""
    installed = _section_entry_points()
    components: list[Component] = []
    for name, entries in config.sections.items():
        if not entries:
            continue
        if name not in installed:
            raise config_error(
                config.source, name, "no installed package provides this section",
                f"install one, or remove it; installed sections: {', '.join(sorted(installed)) or 'none'}",
            )
        factory = _load_factory(name, installed[name], config.source)
        context = BuildContext(broker=broker, namespace=config.namespace, source=config.source, section=name)
        components.extend(factory(entries, context))
    return components


def build_many(configs: Sequence[MeshConfig], broker: BrokerSettings) -> list[Component]:
    """Build the components of several files and check no two of them collide."""
    built = [(config, build_components(config, broker)) for config in configs]
    check_unique_components(built)
    return [component for _, components in built for component in components]


def check_unique_components(built: Iterable[tuple[MeshConfig, Sequence[Component]]]) -> None:
    """Refuse two components of the same kind and name in one namespace, naming both files.

    They would answer on the same topics and overwrite each other's cards. Replicas of one
    agent are run as separate processes with ``shared_subscription``, not twice in one run.
    """
    seen: dict[tuple[str, str, str], MeshConfig] = {}
    for config, components in built:
        for component in components:
            key = (config.namespace, component.kind, component.name)
            if key in seen:
                what = f"{component.kind} {component.name!r} in namespace {config.namespace!r}"
                raise config_error(
                    config.source, "", f"{what} is also defined in {seen[key].source}",
                    "give each one a unique name, or run the files in separate namespaces",
                )
            seen[key] = config

