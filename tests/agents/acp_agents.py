"""The scripted ACP agent (``acp_agent_script.py``) as a mesh agent, for the tests."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from agents.acp import AcpAgent, ClientPolicy

SCRIPT = Path(__file__).with_name("acp_agent_script.py")


def coder(tmp_path: Path, **options: Any) -> AcpAgent:
    """Agent ``coder``: reads (and, if allowed, writes) inside ``tmp_path``; restarts after 50 ms."""
    options.setdefault("policy", ClientPolicy(directory=tmp_path))
    return AcpAgent(
        acp=[sys.executable, str(SCRIPT)],
        env={"ACP_TEST_MARKER": str(tmp_path / "marker")},
        name="coder",
        backoff_s=0.05,
        **options,
    )
