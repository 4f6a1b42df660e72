"""What ``mesh run`` starts and stops: agents, gateways, anything with a name and a lifecycle.

``mesh`` does not import ``agents`` or ``gateways``. A config file's top-level sections
(``agents:``, ``gateways:``) are built by factories those packages register under the
``mesh.sections`` entry-point group; each factory turns its entries into components.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from mesh.broker import BrokerSettings

if TYPE_CHECKING:
    from mesh.artifacts.settings import ArtifactSettings
    from mesh.trust import Trust


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
    #: The file's ``trust:`` mapping (raw; see :func:`component_trust`), if any.
    trust: Mapping[str, Any] | None = None
    #: The file's ``emqx:`` mapping: the default of its agents' ``emqx`` setting (see :mod:`mesh.profile.emqx`).
    emqx: Mapping[str, Any] | None = None
    #: The file's ``artifacts:`` store settings, if any (else ``MESH_ARTIFACTS`` or the embedded store).
    artifacts: ArtifactSettings | None = None
    #: The postgresql:// URLs the file's entries name as ``store:`` (each once): the store the file's
    #: components share, where sections that keep a shared record (``schedules:``) keep it.
    stores: tuple[str, ...] = ()

    def broker_for(self, name: str) -> BrokerSettings:
        """The broker settings of the component ``name`` builds: its own broker identity, if any."""
        return self.broker.for_identity(name)


def component_trust(ctx: BuildContext, name: str, entry_trust: Any, here: Sequence[str | int]) -> Trust | None:
    """The :class:`~mesh.trust.Trust` of component ``name``: the file's ``trust:`` overridden by its entry's."""
    from mesh.trust import load_trust  # loads the JOSE library only for files that use trust

    return load_trust(name, ctx.trust, entry_trust, base=ctx.source.parent, source=ctx.source, where=(*here, "trust"))


SectionFactory = Callable[[Sequence[Any], BuildContext], list[Component]]
