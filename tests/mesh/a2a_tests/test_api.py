"""The public surface of ``mesh.a2a``: ``__all__`` and the package's dependencies."""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

import mesh.a2a

PACKAGE_DIR = pathlib.Path(mesh.a2a.__file__).parent


def test_all_names_exist_and_are_unique() -> None:
    assert len(mesh.a2a.__all__) == len(set(mesh.a2a.__all__))
    missing = [name for name in mesh.a2a.__all__ if not hasattr(mesh.a2a, name)]
    assert missing == []


def test_every_public_class_and_function_is_exported() -> None:
    exported = set(mesh.a2a.__all__)
    unexported = []
    for path in sorted(PACKAGE_DIR.glob("*.py")):
        if path.name == "__init__.py":
            continue
        for node in ast.parse(path.read_text()).body:
            if not isinstance(node, ast.ClassDef | ast.FunctionDef) or node.name[0] == "_":
                continue
            if node.name not in exported and path.stem != "validation":
                unexported.append(f"{path.stem}.{node.name}")
    assert unexported == []


def test_package_is_pure_data() -> None:
    # No transport, no I/O libraries: the models are imported by every layer.
    forbidden = {"paho", "asyncio", "socket", "httpx", "starlette"}
    for path in PACKAGE_DIR.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                roots = {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                roots = {node.module.split(".")[0]}
            else:
                continue
            assert not roots & forbidden, f"{path.name} imports {roots & forbidden}"


def test_importing_does_not_load_paho() -> None:
    code = "import sys, mesh.a2a; sys.exit('paho' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
