"""The README's transport example runs as written (against the test's broker and namespace)
and prints what its comment says."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def transport_example() -> str:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## The transport") :]
    found = re.search(r"```python\n(?P<body>.*?)```", section, re.S)
    assert found is not None, "the README's transport section has no python example"
    return found["body"]


def test_the_readme_transport_example_runs(broker_url: str, namespace: str, tmp_path: Path) -> None:
    code = transport_example()
    assert "mqtt://localhost:1883" in code and "acme/" in code
    script = tmp_path / "transport_example.py"
    script.write_text(code.replace("mqtt://localhost:1883", broker_url).replace("acme/", f"{namespace}/"))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "b'pong' b'42'"
