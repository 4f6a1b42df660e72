"""The public surface of the four packages: what ``__all__`` promises is there, once.

Like httpx's test of its ``__init__``: every package names its public API in ``__all__``, each
name resolves (lazy ones included), and the names users need are among them.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = [
    "topics",
    "mesh",
    "mesh.a2a",
    "mesh.cli",
    "mesh.transport",
    "mesh.trust",
    "agents",
    "agents.builtin",
    "gateways",
    "mesh.e2a",
    "gateways.http",
]
# What users reach for first: the names each package must keep exporting.
KEY_NAMES = {
    "mesh": {
        "MeshClient",
        "BrokerSettings",
        "MessageLimits",
        "MeshError",
        "TransportError",
        "ConnectError",
        "ProtocolError",
        "AgentNotFoundError",
        "ConfigError",
        "__version__",
    },
    "mesh.a2a": {"AgentCard", "AgentSkill", "Message", "Task", "TaskState", "RpcError", "parse_request"},
    "mesh.cli": {"main", "build_parser"},
    "mesh.transport": {"Transport", "MqttTransport", "InboundMessage"},
    "mesh.trust": {"Identity", "Trust", "TrustSettings", "sign_card", "generate_keys"},
    "agents": {
        "Agent",
        "AgentService",
        "AgentSettings",
        "TaskContext",
        "Reply",
        "Status",
        "InputRequired",
        "TextArtifact",
        "TaskFailed",
        "AgentError",
        "DelegationError",
        "__version__",
    },
    "agents.builtin": {"UP_CONFIG", "EchoAgent", "CalculatorAgent"},
    "gateways": {"HttpGateway", "GatewayRuntime", "GatewayError", "__version__"},
    "mesh.e2a": {"E2AEnvelope", "E2AResponse", "E2AError", "is_secret_key"},
    "gateways.http": {"UP_CONFIG", "HttpGateway", "HttpGatewaySettings"},
}


@pytest.mark.parametrize("name", PACKAGES)
def test_all_lists_each_name_once_and_every_name_resolves(name: str) -> None:
    package = importlib.import_module(name)
    exported = package.__all__
    assert len(exported) == len(set(exported)), sorted(n for n in set(exported) if exported.count(n) > 1)
    assert [n for n in exported if not hasattr(package, n)] == []
    assert KEY_NAMES.get(name, set()) <= set(exported)


@pytest.mark.parametrize("name", PACKAGES)
def test_star_import_gives_exactly_all(name: str) -> None:
    namespace: dict[str, object] = {}
    exec(f"from {name} import *", namespace)  # noqa: S102 - the very statement users write
    namespace.pop("__builtins__")
    assert set(namespace) == set(importlib.import_module(name).__all__)


def test_lazy_names_are_the_objects_of_their_modules() -> None:
    import gateways
    import gateways.http.server
    import mesh
    import mesh.client
    import mesh.limits

    assert mesh.MeshClient is mesh.client.MeshClient
    assert mesh.MessageLimits is mesh.limits.MessageLimits
    assert gateways.HttpGateway is gateways.http.server.HttpGateway
    assert {"MeshClient", "MessageLimits"} <= set(dir(mesh))
    with pytest.raises(AttributeError, match="module 'mesh' has no attribute 'Nope'"):
        mesh.Nope  # noqa: B018


def test_one_version_from_the_distribution_metadata() -> None:
    import agents
    import gateways
    import mesh

    expected = importlib.metadata.version("mqtt-agent-mesh")
    assert mesh.__version__ == agents.__version__ == gateways.__version__ == expected


def test_errors_exported_by_mesh_and_agents_share_one_root() -> None:
    import agents
    import mesh

    for package, root in ((mesh, mesh.MeshError), (agents, agents.AgentError)):
        errors = [getattr(package, n) for n in package.__all__ if n.endswith("Error")]
        assert errors and all(issubclass(e, root) for e in errors), package.__name__
    assert issubclass(agents.AgentError, mesh.MeshError)


@pytest.mark.parametrize("package", ["topics", "mesh", "agents", "gateways"])
def test_packages_are_marked_typed(package: str) -> None:
    assert (ROOT / package / "py.typed").is_file()


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, cwd=ROOT, timeout=60
    )


def test_importing_the_packages_is_cheap() -> None:
    """``import mesh`` / ``gateways`` / ``mesh.e2a`` load neither paho nor pydantic nor starlette."""
    result = _run(
        """
        import sys
        import mesh, gateways, mesh.e2a, gateways.http
        heavy = sorted({m.split(".")[0] for m in sys.modules} & {"paho", "pydantic", "starlette", "uvicorn"})
        print(heavy)
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_gateways_import_without_the_http_extra() -> None:
    result = _run(
        """
        import sys

        class NoWebFramework:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in {"starlette", "uvicorn"}:
                    raise ModuleNotFoundError(f"No module named {name!r}", name=name)
                return None

        sys.meta_path.insert(0, NoWebFramework())
        import gateways, gateways.http
        from gateways import GatewayRuntime
        print(gateways.__version__ != "", gateways.http.UP_CONFIG.name)
        try:
            gateways.HttpGateway
        except ModuleNotFoundError as exc:
            print("needs", exc.name)
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "mesh-up.yaml", "needs", "uvicorn"]


MOVED = {
    "mesh.registry": "mesh.discovery.registry",
    "mesh.emqx": "mesh.profile.emqx",
    "mesh.a2a_v1": "mesh.profile.v1",
    "mesh.sections": "mesh.config.sections",
    "mesh.credentials": "mesh.config.credentials",
}


@pytest.mark.parametrize(("old", "new"), MOVED.items())
def test_a_moved_module_keeps_its_old_path_for_a_release_with_a_warning(old: str, new: str) -> None:
    """The old path is the new module itself (patching either patches both), and says where it went."""
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=f"{old} moved to {new}"):
        moved = importlib.import_module(old)
    assert moved is importlib.import_module(new)
    assert moved.__spec__ is not None and moved.__spec__.name == new  # its own spec, not the alias's


def test_the_old_single_modules_discovery_and_config_are_their_packages() -> None:
    """``from mesh.config import load_config`` and ``from mesh.discovery import lease_registry`` as before."""
    from mesh.config import load_config
    from mesh.config.files import load_config as loaded
    from mesh.discovery import lease_registry
    from mesh.discovery.shared import lease_registry as leased

    assert load_config is loaded and lease_registry is leased


def test_the_top_of_mesh_stays_small() -> None:
    """The tree shows the design: concepts live in subpackages, few modules stay at the top."""
    top = sorted(path.name for path in (ROOT / "mesh").glob("*.py"))
    assert len(top) <= 14, f"mesh/ has {len(top)} top-level modules; group them in a subpackage: {top}"
