"""The transport example of docs/protocol.md runs as written (against the test's broker and namespace)
and prints what its comment says."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

PAGE = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"


def transport_example() -> str:
    text = PAGE.read_text(encoding="utf-8")
    section = text[text.index("## The transport") :]
    found = re.search(r"```python\n(?P<body>.*?)```", section, re.S)
    assert found is not None, "the transport section of docs/protocol.md has no python example"
    return found["body"]


def test_the_documented_transport_example_runs(broker_url: str, namespace: str, tmp_path: Path) -> None:
    code = transport_example()
    assert "sys.argv[1]" in code and "acme/" in code  # the broker URL is its argument
    script = tmp_path / "transport_example.py"
    script.write_text(code.replace("acme/", f"{namespace}/"))
    argv = [sys.executable, str(script), broker_url]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "b'pong' b'42'"
