"""The version of the installed ``mqtt-agent-mesh`` distribution, read from its metadata.

One source for the four packages: ``mesh``, ``agents`` and ``gateways`` re-export it as
``__version__`` (``topics`` stays free of I/O and does not).
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

__all__ = ["DISTRIBUTION", "__version__"]

DISTRIBUTION = "mqtt-agent-mesh"

try:
    __version__ = version(DISTRIBUTION)
except PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"
