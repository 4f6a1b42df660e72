"""The import rules of DESIGN "Layout", checked on the source of every module.

- ``topics`` <- ``mesh`` <- ``agents``, ``gateways``: a package never imports one to its right;
  ``agents`` and ``gateways`` never import each other (gateways send tasks with mesh's client;
  the E2A envelope both use lives in ``mesh.e2a``), without exception.
- paho-mqtt is imported only by ``mesh/transport/``.
- The web framework (starlette, uvicorn, fastapi) only by ``gateways/http/``.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("topics", "mesh", "agents", "gateways")
FORBIDDEN = {
    "topics": {"mesh", "agents", "gateways"},
    "mesh": {"agents", "gateways"},
    "agents": {"gateways"},
    "gateways": {"agents"},
}
WEB = {"starlette", "uvicorn", "fastapi", "sse_starlette"}


def modules() -> list[Path]:
    return sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py"))


def imported_modules(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
    return found


def imported_roots(path: Path) -> set[str]:
    return {name.split(".")[0] for name in imported_modules(path)}


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_follow_the_layers(path: Path) -> None:
    relative = path.relative_to(ROOT)
    package = relative.parts[0]
    imported = imported_modules(path)
    roots = {name.split(".")[0] for name in imported}
    assert not roots & FORBIDDEN[package], f"{relative} imports {sorted(roots & FORBIDDEN[package])}"
    if package == "topics":
        third_party = {r for r in roots if r not in sys.stdlib_module_names and r != "topics"}
        assert not third_party, f"{relative}: topics must stay pure, imports {sorted(third_party)}"
    if "paho" in roots:
        assert relative.parts[:2] == ("mesh", "transport"), f"{relative} imports paho outside mesh/transport"
    if roots & WEB:
        assert relative.parts[:2] == ("gateways", "http"), f"{relative} imports a web framework"


@pytest.mark.parametrize("path", sorted((ROOT / "mesh" / "e2a").rglob("*.py")), ids=lambda p: p.name)
def test_the_e2a_package_needs_only_the_standard_library_and_mesh(path: Path) -> None:
    for name in imported_modules(path):
        root = name.split(".")[0]
        assert root in sys.stdlib_module_names or root == "mesh", f"{path.name} imports {name}"


def test_every_package_is_checked() -> None:
    checked = {p.relative_to(ROOT).parts[0] for p in modules()}
    assert checked == set(PACKAGES)


def test_no_test_folder_shadows_a_package_a_test_script_imports() -> None:
    """A script run from tests/<x>/ (a fake agent, a worker) has tests/<x>/ first on sys.path: a
    test folder there named like an installed or standard package (acp, mcp, a2a, http, profile)
    would be imported instead of it."""
    import importlib.util

    shadowing = []
    for folder in sorted(p for p in (ROOT / "tests").rglob("*") if p.is_dir() and (p / "__init__.py").exists()):
        if folder.name in {"tests", "agents", "gateways", "mesh", "topics"}:
            continue  # the project's own packages, by design
        if importlib.util.find_spec(folder.name) is not None:
            shadowing.append(str(folder.relative_to(ROOT)))
    assert not shadowing, f"rename these test folders (e.g. <name>_tests): {shadowing}"
