"""Package attributes loaded on first use (PEP 562), so importing a package stays cheap.

A package whose ``__init__`` would otherwise import pydantic, paho or an optional extra
(starlette, for the HTTP gateway) names those exports here and imports them under
``TYPE_CHECKING`` for the type checker::

    __getattr__, __dir__ = lazy_exports(__name__, {"MeshClient": "mesh.client"})
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

__all__ = ["alias_moved_modules", "lazy_exports"]


def lazy_exports(package: str, exports: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module ``__getattr__`` and ``__dir__`` of ``package``; ``exports`` maps name -> module."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)  # the next lookup skips this function
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *exports})

    return __getattr__, __dir__


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Old import paths of moved modules: the old name is the new module itself (one module
    object, so patching either name patches both), with a DeprecationWarning naming the new path."""

    def __init__(self, moves: Mapping[str, str]) -> None:
        self.moves = dict(moves)
        self._specs: dict[str, importlib.machinery.ModuleSpec | None] = {}

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self.moves:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        new = self.moves[spec.name]
        warnings.warn(f"{spec.name} moved to {new}; import it from there", DeprecationWarning, stacklevel=2)
        module = importlib.import_module(new)
        self._specs[new] = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        """The new module ran when it was imported: nothing to run again. The import system has
        just set its ``__spec__`` to the old name's; give it its own back (reload, pickling)."""
        module.__spec__ = self._specs.get(module.__name__, module.__spec__)


def alias_moved_modules(moves: Mapping[str, str]) -> None:
    """Keep the old import paths of ``moves`` (old -> new module name) working for a release."""
    if not any(isinstance(finder, _MovedModules) and finder.moves == dict(moves) for finder in sys.meta_path):
        sys.meta_path.append(_MovedModules(moves))
