"""Example agents run by `mesh up`: echo, calculator, countdown."""

from pathlib import Path

#: The config `mesh up` runs for them (the ``mesh.up`` entry point).
UP_CONFIG = Path(__file__).with_name("mesh-up.yaml")
