"""Every method set derives from :class:`mesh.a2a.Method` (issue 41).

A module that spells out a set of method names by hand (``{"message/send", "message/stream"}``,
``method in ("GetTask", "CancelTask")``, a dict keyed by names) drifts from the one table when
a method is added; it must take :data:`SEND_METHODS`, :data:`STREAMING_METHODS`,
:data:`TASK_ANSWER_METHODS`, :data:`BY_V1_NAME` or the members' ``v1_name`` / ``aliases``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from mesh.a2a.methods import (
    BY_V1_NAME,
    SEND_METHODS,
    SEND_NAMES,
    STREAMING_METHODS,
    TASK_ANSWER_METHODS,
    Method,
)

ROOT = Path(__file__).resolve().parent.parent
TABLE = ROOT / "mesh" / "a2a" / "methods.py"
NAMES = frozenset({*map(str, Method), *(m.v1_name for m in Method), *(a for m in Method for a in m.aliases)})
SOURCES = sorted(
    path for package in ("topics", "mesh", "agents", "gateways") for path in (ROOT / package).rglob("*.py")
)


def _names_in(nodes: list[ast.expr | None]) -> list[str]:
    return [node.value for node in nodes if isinstance(node, ast.Constant) and node.value in NAMES]


def spelled_out_sets(source: str) -> list[tuple[int, list[str]]]:
    """Each set, tuple, list, dict or ``or``-chain of comparisons naming two methods or more."""
    found = []
    for node in ast.walk(ast.parse(source)):
        names: list[str] = []
        if isinstance(node, ast.Set | ast.Tuple | ast.List):
            names = _names_in(list(node.elts))
        elif isinstance(node, ast.Dict):
            names = max(_names_in(list(node.keys)), _names_in(list(node.values)), key=len)
        elif isinstance(node, ast.BoolOp):
            names = _names_in([c.comparators[0] for c in node.values if isinstance(c, ast.Compare)])
        if len(names) >= 2:
            found.append((node.lineno, names))
    return found


def test_the_check_sees_a_method_set_spelled_out() -> None:
    sample = (
        'A = frozenset({"message/send", "message/stream"})\n'
        'ok = method in ("GetTask", "CancelTask")\n'
        'T = {"tasks/get": 1, "tasks/cancel": 2}\n'
        'b = m == "tasks/get" or m == "agent/cancelTask"\n'
        'fine = call("tasks/get", {"id": 1})\n'
    )
    assert sorted(line for line, _ in spelled_out_sets(sample)) == [1, 2, 3, 4]


@pytest.mark.parametrize("path", [p for p in SOURCES if p != TABLE], ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_spells_out_a_method_set(path: Path) -> None:
    found = spelled_out_sets(path.read_text(encoding="utf-8"))
    where = ", ".join(f"line {line}: {names}" for line, names in found)
    assert not found, f"{path.relative_to(ROOT)} spells out method names ({where}); derive them from mesh.a2a.methods"


def test_the_derived_sets() -> None:
    assert {Method.message_send, Method.message_stream} == SEND_METHODS
    assert {"message/send", "message/stream", "agent/sendMessage", "agent/sendStreamingMessage"} == SEND_NAMES
    assert {Method.message_stream, Method.tasks_resubscribe} == STREAMING_METHODS
    assert {Method.tasks_get, Method.tasks_cancel} == TASK_ANSWER_METHODS
    assert BY_V1_NAME["SubscribeToTask"] is Method.tasks_resubscribe and len(BY_V1_NAME) == len(Method)
    assert "message/send" in SEND_METHODS  # members are their wire names
