"""What ``mesh run`` starts and stops: agents, gateways, anything with a name and a lifecycle.

``mesh`` does not import ``agents`` or ``gateways``. A config file's top-level sections
(``agents:``, ``gateways:``) are built by factories those packages register under the
``mesh.sections`` entry-point group; each factory turns its entries into components.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from mesh.broker import BrokerSettings


@runtime_checkable
class Component(Protocol):
    """A service connected to the mesh."""

    @property
    def name(self) -> str: ...

    @property
    def kind(self) -> str:
        """``"agent"`` or ``"gateway"``; shown in logs and by ``mesh up``."""
        ...

    async def start(self) -> None:
        """Connect and begin serving; raise if that is impossible."""

    async def stop(self) -> None:
        """Finish in-flight work (answering every accepted request) and disconnect."""


@dataclass(frozen=True, slots=True)
class BuildContext:
    """What a section factory needs besides its own entries."""

    broker: BrokerSettings
    namespace: str
    source: Path
    section: str

    def broker_for(self, name: str) -> BrokerSettings:
        """The broker settings of the component ``name`` builds: its own broker identity, if any."""
        return self.broker.for_identity(name)


SectionFactory = Callable[[Sequence[Any], BuildContext], list[Component]]
