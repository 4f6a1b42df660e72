"""What ``mesh eval`` tells: a table on the terminal, JUnit XML for CI, JSON to compare a later
run with (``--baseline``): a case that passed there and fails now is a regression."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mesh.errors import ConfigError
from mesh.evals.runner import CaseResult

__all__ = ["Comparison", "compare", "load_baseline", "table", "to_json", "to_junit"]

JSON_FORMAT = "mesh-eval/1"


def table(results: Sequence[CaseResult]) -> str:
    """One line per case run: result, name, agent, seconds, and why it failed (with a diff under it)."""
    header = ["RESULT", "CASE", "AGENT", "SECONDS", "DETAIL"]
    rows: list[list[str]] = []
    extra: dict[int, list[str]] = {}
    for result in results:
        failed = [c for c in result.checks if not c.passed]
        detail = ""
        if failed:
            first, *rest = failed[0].detail.splitlines() or [""]
            detail = f"{failed[0].scorer}: {first}"
            lines = [f"    {line}" for line in rest]
            lines += [f"    {c.scorer}: {c.detail}" for c in failed[1:]]
            if lines:
                extra[len(rows)] = lines
        rows.append(
            ["pass" if result.passed else "FAIL", result.label, result.agent, f"{result.answer.latency_s:.2f}", detail]
        )
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header) - 1)]
    lines = []
    for index, row in enumerate([header, *rows]):
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        lines.append("  ".join([*cells, row[-1]]).rstrip())
        lines += extra.get(index - 1, [])
    passed = sum(r.passed for r in results)
    lines.append(
        f"{passed} of {len(results)} passed" + (f", {len(results) - passed} failed" if passed < len(results) else "")
    )
    return "\n".join(lines)


def to_json(results: Sequence[CaseResult], source: Path) -> dict[str, Any]:
    return {
        "format": JSON_FORMAT,
        "file": str(source),
        "passed": sum(r.passed for r in results),
        "failed": sum(not r.passed for r in results),
        "cases": [
            {
                "name": r.case.name,
                "run": r.run,
                "agent": r.agent,
                "passed": r.passed,
                "state": r.answer.state,
                "answer": r.answer.text,
                "task_id": r.answer.task_id,
                "latency_s": round(r.answer.latency_s, 4),
                "tokens": r.answer.tokens,
                "tool_calls": [{"name": t.name, "arguments": t.arguments} for t in r.answer.tool_calls],
                "checks": [{"scorer": c.scorer, "passed": c.passed, "detail": c.detail} for c in r.checks],
            }
            for r in results
        ],
    }


def to_junit(results: Sequence[CaseResult], source: Path) -> bytes:
    """A JUnit XML report: one ``testsuite`` (the file), one ``testcase`` per case run."""
    failures = sum(not r.passed for r in results)
    total = sum(r.answer.latency_s for r in results)
    suite = ET.Element(
        "testsuite", name=source.stem, tests=str(len(results)), failures=str(failures), errors="0", time=f"{total:.3f}"
    )
    for result in results:
        case = ET.SubElement(
            suite, "testcase", classname=result.agent, name=result.label, time=f"{result.answer.latency_s:.3f}"
        )
        failed = [c for c in result.checks if not c.passed]
        if failed:
            first = (failed[0].detail.splitlines() or [""])[0]
            failure = ET.SubElement(case, "failure", message=f"{failed[0].scorer}: {first}")
            failure.text = "\n".join(f"{c.scorer}: {c.detail}" for c in failed)
        if result.answer.text:
            ET.SubElement(case, "system-out").text = result.answer.text
    return bytes(ET.tostring(suite, encoding="utf-8", xml_declaration=True))


@dataclass(frozen=True, slots=True)
class Comparison:
    regressions: list[str]  # passed in the baseline, fail now
    fixed: list[str]  # failed in the baseline, pass now
    new: list[str]  # not in the baseline

    def lines(self) -> list[str]:
        said = [f"regression: {name} passed in the baseline and fails now" for name in self.regressions]
        said += [f"fixed: {name} failed in the baseline and passes now" for name in self.fixed]
        said += [f"new: {name} is not in the baseline" for name in self.new]
        return said or ["baseline: no case changed"]


def load_baseline(path: Path) -> dict[str, bool]:
    """Each case run's result of a previous ``--json`` file, by label (``name`` or ``name#2``)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"--baseline {path}: no such file; give the --json file of an earlier run") from None
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"--baseline {path}: cannot read it as JSON ({exc}); give a --json file of mesh eval"
        ) from None
    if not isinstance(data, dict) or data.get("format") != JSON_FORMAT or not isinstance(data.get("cases"), list):
        raise ConfigError(f"--baseline {path}: not a mesh eval --json file (format {JSON_FORMAT!r})")
    found = {}
    for case in data["cases"]:
        label = case["name"] if case.get("run", 1) == 1 else f"{case['name']}#{case['run']}"
        found[label] = bool(case.get("passed"))
    return found


def compare(results: Sequence[CaseResult], baseline: dict[str, bool]) -> Comparison:
    regressions, fixed, new = [], [], []
    for result in results:
        before = baseline.get(result.label)
        if before is None:
            new.append(result.label)
        elif before and not result.passed:
            regressions.append(result.label)
        elif not before and result.passed:
            fixed.append(result.label)
    return Comparison(regressions, fixed, new)
