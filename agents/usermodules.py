"""The Python module of a ``class:`` entry (:mod:`agents.config`): found beside the config file
or by path, never shadowed by the mesh's own packages, every failure of its import a
:class:`~mesh.errors.ConfigError` naming the problem and the fix.
"""

from __future__ import annotations

import importlib
import sys
import traceback
from contextvars import ContextVar
from pathlib import Path
from types import ModuleType

from mesh.config.errors import KeyPart, config_error
from mesh.errors import ConfigError

__all__ = ["BUILD_MODULES", "user_module"]

#: The mesh's own top-level packages: a user's module of the same name can only be loaded by path.
_OWN_PACKAGES = ("topics", "mesh", "agents", "gateways")


#: The modules of ``class:`` entries found by the :func:`build_agents` running: a file of 1,000
#: entries of one class looks for it (and for a shadowing file beside the config) once.
BUILD_MODULES: ContextVar[dict[tuple[str, Path], ModuleType] | None] = ContextVar("BUILD_MODULES", default=None)


def user_module(module_name: str, source: Path, where: tuple[KeyPart, ...]) -> ModuleType:
    """The module of a ``class:`` entry, every failure of its import a :class:`ConfigError`."""
    found = BUILD_MODULES.get()
    if found is None:
        return _find_user_module(module_name, source, where)
    module = found.get((module_name, source))
    if module is None:
        module = found[module_name, source] = _find_user_module(module_name, source, where)
    return module


def _find_user_module(module_name: str, source: Path, where: tuple[KeyPart, ...]) -> ModuleType:
    try:
        if module_name.endswith(".py"):
            path = source.resolve().parent / module_name
            if not path.is_file():
                raise config_error(
                    source,
                    where,
                    f"no file {path}",
                    "check the path: a relative one starts at the config file's folder",
                )
            return _import_path(path)
        _refuse_shadowed(module_name, source, where)
        return _import_beside(module_name, source)
    except ImportError as exc:
        raise config_error(source, where, *_import_problem(module_name, exc, source)) from exc
    except ConfigError:
        raise
    except Exception as exc:  # SyntaxError, or anything the module raises while it loads
        raise config_error(source, where, *_load_problem(module_name, exc)) from exc


def _refuse_shadowed(module_name: str, source: Path, where: tuple[KeyPart, ...]) -> None:
    """A user's ``agents.py`` (or ``mesh.py``...) beside the file would resolve to the mesh's own package."""
    top = module_name.split(".")[0]
    if top not in _OWN_PACKAGES:
        return
    directory = source.resolve().parent
    own = Path(__file__).resolve().parents[1] / top / "__init__.py"  # the mesh's package, when run from a clone
    for candidate in (directory / f"{top}.py", directory / top / "__init__.py"):
        if candidate.is_file() and candidate.resolve() != own:
            shown = candidate if candidate.name == f"{top}.py" else candidate.parent
            raise config_error(
                source,
                where,
                f"{shown} has the name of the mesh's own package {top!r}, so 'import {top}' finds the mesh's",
                f"rename your file (e.g. my_{top}.py, then class: my_{top}:YourClass), "
                f"or load it by path: class: ./{top}.py:YourClass",
            )


def _import_path(path: Path) -> ModuleType:
    """Load a module from a file path (``class: ./agents.py:Hello``), under a name of its own."""
    import importlib.util

    name = f"_mesh_user_{abs(hash(str(path))):x}_{path.stem}"
    if (loaded := sys.modules.get(name)) is not None:
        return loaded
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path} as a Python module", name=str(path))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def _load_problem(module_name: str, exc: Exception) -> tuple[str, str]:
    """What a module that raised while loading did wrong, where, and what to do."""
    if isinstance(exc, SyntaxError):
        place = f"{exc.filename}:{exc.lineno}" if exc.filename else module_name
        return f"module {module_name!r} has a syntax error at {place}: {exc.msg}", "fix the syntax there"
    frames = traceback.extract_tb(exc.__traceback__)
    last = frames[-1] if frames else None
    place = f" at {last.filename}:{last.lineno}" if last is not None else ""
    return (
        f"module {module_name!r} raised {type(exc).__name__} while loading{place}: {exc}",
        "fix the module so that importing it succeeds (run 'python -c \"import "
        f"{module_name.removesuffix('.py')}\"' beside the file to see the whole traceback)",
    )


def _import_beside(module_name: str, source: Path) -> ModuleType:
    """Import ``module_name``, also looking in the config file's directory (after sys.path), as
    Python looks beside a script: ``class: weather:Weather`` finds the ``weather.py`` next to the
    file, whatever the working directory."""
    directory = str(source.resolve().parent)
    if directory not in sys.path:
        sys.path.append(directory)
    return importlib.import_module(module_name)


def _import_problem(module_name: str, exc: ImportError, source: Path) -> tuple[str, str]:
    missing = exc.name or ""
    if not isinstance(exc, ModuleNotFoundError) or not missing:
        return (
            f"module {module_name!r} failed to import: {exc}",
            "fix that import, or install versions of its dependencies that provide what it imports",
        )
    if module_name == missing or module_name.startswith(missing + "."):
        return (
            f"cannot import module {module_name!r} ({exc})",
            "check the spelling, put its file beside the config file "
            f"({source.resolve().parent}), install the package that provides it, or add its directory to PYTHONPATH",
        )
    # The module exists; something it imports does not.
    return (
        f"module {module_name!r} failed to import: {exc}",
        f"install the package that provides {missing!r} (pip install {missing.split('.')[0]})",
    )
