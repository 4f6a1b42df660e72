"""Package attributes loaded on first use (PEP 562), so importing a package stays cheap.

A package whose ``__init__`` would otherwise import pydantic, paho or an optional extra
(starlette, for the HTTP gateway) names those exports here and imports them under
``TYPE_CHECKING`` for the type checker::

    __getattr__, __dir__ = lazy_exports(__name__, {"MeshClient": "mesh.client"})
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


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
