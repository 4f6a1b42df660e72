"""No module reaches into another module's private members (DESIGN "Layout": small modules
meeting at public seams).

An attribute ``x._name`` on anything but ``self`` / ``cls`` / ``super()`` is allowed only when
``_name`` is the module's own: a function, method, class attribute or ``self._name`` the same
module defines (classes of one module may cooperate through their privates). The standard
library's and libraries' documented underscore names are listed in ``LIBRARY``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("topics", "mesh", "agents", "gateways")
#: Underscore names of other libraries' public API (namedtuple, enum, argparse, os).
LIBRARY = frozenset({"_replace", "_asdict", "_fields", "_value_", "_name_", "_SubParsersAction", "_actions", "_exit"})


def modules() -> list[Path]:
    return sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py"))


def own_private_names(tree: ast.AST) -> set[str]:
    """The underscore names a module defines: defs, class attributes, ``self._x`` assignments, slots."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("_"):
            names.add(node.value)  # __slots__ entries
    return {n for n in names if n.startswith("_")}


def foreign_private_uses(source: str, label: str) -> list[str]:
    tree = ast.parse(source, label)
    own = own_private_names(tree)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        name = node.attr
        if not name.startswith("_") or name.startswith("__") or name in LIBRARY or name in own:
            continue
        value = node.value
        if isinstance(value, ast.Name) and value.id in {"self", "cls"}:
            continue
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "super":
            continue
        found.append(f"{label}:{node.lineno}: {ast.unparse(node)}")
    return found


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_uses_another_modules_private_members(path: Path) -> None:
    assert foreign_private_uses(path.read_text(), str(path.relative_to(ROOT))) == []


def test_the_check_finds_a_foreign_private_member() -> None:
    source = (
        "def f(path):\n    path._send(1)\n    super()._x\n\n"
        "class A:\n    def g(self, other):\n        self._own = 1\n        other._own\n"
    )
    assert foreign_private_uses(source, "sample.py") == ["sample.py:2: path._send"]
