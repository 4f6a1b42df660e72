"""Sections of config files and the components they build.

A file's sections (``agents:``, ``gateways:``...) are built by factories other packages
register under the ``mesh.sections`` entry-point group; a factory's package is imported only
when its section appears in a file, so ``mesh`` never imports ``agents`` or ``gateways``.
"""

from __future__ import annotations

import re
import typing
from collections.abc import Iterable, Sequence
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mesh.broker import BrokerSettings
from mesh.component import BuildContext, Component, SectionFactory
from mesh.config.errors import config_error
from mesh.errors import ConfigError

if TYPE_CHECKING:
    from mesh.config import MeshConfig

SECTIONS_GROUP = "mesh.sections"
# Top-level keys of a config file that are not sections.
CORE_KEYS = ("broker", "tls", "namespace", "log_level", "trust", "artifacts", "emqx")
#: Sections ``mesh`` itself provides (no package to install): built like the others, by a factory.
BUILTIN_SECTIONS = {"schedules": "mesh.schedules.section:build_schedules"}


def _section_entry_points() -> dict[str, EntryPoint]:
    """The installed ``mesh.sections`` entry points by name (not loaded), then mesh's own; a seam for tests."""
    found: dict[str, EntryPoint] = {}
    for entry_point in entry_points(group=SECTIONS_GROUP):
        # The same distribution seen twice on sys.path: the first one wins, as for imports.
        if entry_point.name not in CORE_KEYS:
            found.setdefault(entry_point.name, entry_point)
    for name, value in BUILTIN_SECTIONS.items():
        found.setdefault(name, EntryPoint(name=name, value=value, group=SECTIONS_GROUP))
    return found


def section_names() -> frozenset[str]:
    """Names of the installed sections; reads metadata only, imports nothing."""
    return frozenset(_section_entry_points())


def _load_factory(name: str, entry_point: EntryPoint, where: str | Path) -> SectionFactory:
    try:
        factory = entry_point.load()
    except ImportError as exc:
        raise config_error(
            where,
            name,
            f"cannot load the section's factory {entry_point.value} ({exc})",
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
    """The extra of *dist* requiring a distribution named like *module*: non-dev extras first, then the
    smallest (``http`` before ``grpc``, which pulls ``http`` in)."""
    wanted = _normalized(module)
    extras = []
    sizes: dict[str, int] = {}
    for requirement in getattr(dist, "requires", None) or []:
        found = re.match(r"\s*([A-Za-z0-9_.-]+).*;.*extra\s*==\s*['\"]([^'\"]+)['\"]", requirement)
        if found:
            sizes[found[2]] = sizes.get(found[2], 0) + 1
        if found and _normalized(found[1]) == wanted:
            extras.append(found[2])
    extras.sort(key=lambda extra: (extra in ("dev", "test", "tests"), sizes[extra]))
    return extras[0] if extras else None


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()  # PEP 503


def build_components(config: MeshConfig, broker: BrokerSettings) -> list[Component]:
    """Build every component of one file, importing only the factories of its non-empty sections."""
    installed = _section_entry_points()
    stores = shared_stores(config)
    components: list[Component] = []
    for name, entries in config.sections.items():
        if not entries:
            continue
        if name not in installed:
            raise config_error(
                config.source,
                name,
                "no installed package provides this section",
                f"install one, or remove it; installed sections: {', '.join(sorted(installed)) or 'none'}",
            )
        factory = _load_factory(name, installed[name], config.source)
        context = BuildContext(
            broker=broker,
            namespace=config.namespace,
            source=config.source,
            section=name,
            trust=config.trust,
            artifacts=config.artifacts,
            emqx=config.emqx,
            stores=stores,
        )
        try:
            components.extend(factory(entries, context))
        except ImportError as exc:  # a dependency of the section's package, e.g. of an extra not installed
            problem = f"cannot load what the section needs ({exc})"
            hint = _install_hint(name, installed[name], exc)
            raise MissingDependencyError(config_error(config.source, name, problem, hint), hint=hint) from exc
    return components


def shared_stores(config: MeshConfig) -> tuple[str, ...]:
    """The distinct ``postgresql://`` URLs the file's entries name as ``store:`` (agents, workflows), in order."""
    from mesh.store import is_postgres_url

    found: dict[str, None] = {}
    for entries in config.sections.values():
        for entry in entries or ():
            value = entry.get("store") if isinstance(entry, dict) else None
            if isinstance(value, str) and is_postgres_url(value):
                found.setdefault(value, None)
    return tuple(found)


class MissingDependencyError(ConfigError):
    """A section's package needs a module that is not installed; ``hint`` says how to install it."""

    def __init__(self, error: ConfigError, *, hint: str) -> None:
        super().__init__(str(error))
        self.hint = hint


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
                    config.source,
                    "",
                    f"{what} is also defined in {seen[key].source}",
                    "give each one a unique name, or run the files in separate namespaces",
                )
            seen[key] = config
