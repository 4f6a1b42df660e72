"""Example agents run by `mesh up`: echo, calculator, countdown, orchestrator."""

from pathlib import Path

from agents.builtin.calculator import CalculatorAgent
from agents.builtin.countdown import CountdownAgent
from agents.builtin.echo import EchoAgent
from agents.builtin.orchestrator import OrchestratorAgent

__all__ = ["UP_CONFIG", "CalculatorAgent", "CountdownAgent", "EchoAgent", "OrchestratorAgent"]

#: The config `mesh up` runs for them (the ``mesh.up`` entry point).
UP_CONFIG = Path(__file__).with_name("mesh-up.yaml")
