"""The ``gateways:`` section of a config file, through the same loader ``mesh run`` uses."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from gateways.http.server import HttpGateway
from mesh.broker import BrokerSettings
from mesh.config import load_config
from mesh.config.sections import build_components
from mesh.errors import ConfigError

BROKER = BrokerSettings.from_url("mqtt://127.0.0.1:1883")


def build(tmp_path: Path, body: str, **environ: str) -> list[HttpGateway]:
    path = tmp_path / "gw.yaml"
    path.write_text(textwrap.dedent(body))
    components = build_components(load_config(path, environ=environ), BROKER)
    return components  # type: ignore[return-value]


def test_an_http_gateway_entry_builds_a_gateway(tmp_path: Path) -> None:
    [gateway] = build(
        tmp_path,
        """
        namespace: acme
        gateways:
          - kind: http
            id: web
            port: 0
            public_url: https://a2a.example.com/
            default_agent: echo
            auth: {mode: bearer, tokens: ["${TOKEN}"]}
            rate_limit: {requests: 5, window_s: 10}
        """,
        TOKEN="t0k",
    )
    assert isinstance(gateway, HttpGateway) and (gateway.kind, gateway.name) == ("gateway", "web")
    assert gateway.public_url == "https://a2a.example.com"
    assert gateway.settings.auth.mode == "bearer" and gateway.settings.rate_limit is not None
    assert gateway.settings.rate_limit.requests == 5 and gateway.settings.default_agent == "echo"


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ("- kind: ftp", "gateways[0].kind: unknown gateway kind 'ftp'; use one of: http"),
        ("- {kind: http, port: 0, prot: 1}", "gateways[0].prot: unknown key 'prot'; did you mean 'port'?"),
        ("- {kind: http, port: 70000}", "gateways[0].port:"),
        ("- {kind: http, port: 0, default_agent: 'no such'}", "gateways[0].default_agent:"),
        ("- {kind: http, port: 0, auth: {mode: bearer}}", "gateways[0].auth"),
        (
            "- {kind: http, port: 0, id: a}\n  - {kind: http, port: 0, id: a}",
            "gateways[1].id: gateway id 'a' is also used by gateways[0]",
        ),
        ("- just a string", "gateways[0]: expected a mapping"),
        (
            "- {kind: http, port: 0, auth: {mode: api_key, keys: [k-1234567890], oidc: {issuer: https://id.example.com,"
            " client_idd: gw}}}",
            "did you mean 'client_id'?",
        ),
        (
            "- {kind: http, port: 0, auth: {oidc: {issuer: https://id.example.com, client_id: gw}}}",
            "oidc needs a mode for programs too",
        ),
        (
            "- {kind: http, port: 0, auth: {mode: api_key, keys: [k-1234567890], oidc: {issuer: http://id.example.com,"
            " client_id: gw}}}",
            "must use https",
        ),
        (
            "- {kind: http, port: 0, auth: {mode: api_key, keys: [k-1234567890], oidc: {issuer: https://id.example.com,"
            " client_id: gw, client_secret_env: MESH_TEST_UNSET_SECRET}}}",
            "environment variable MESH_TEST_UNSET_SECRET is not set",
        ),
        (
            "- {kind: http, port: 0, auth: {mode: api_key, keys: [k-1234567890], oidc: {issuer: https://id.example.com,"
            " client_id: gw, scopes: [email]}}}",
            "scopes must include 'openid'",
        ),
    ],
)
def test_bad_entries_name_the_file_the_key_and_the_fix(tmp_path: Path, entry: str, says: str) -> None:
    with pytest.raises(ConfigError) as caught:
        build(tmp_path, f"gateways:\n  {entry}\n")
    assert str(caught.value).startswith(str(tmp_path / "gw.yaml")) and says in str(caught.value)


def test_secrets_never_appear_in_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        build(tmp_path, "gateways:\n  - {kind: http, port: 0, auth: {mode: bearer, tokens: [s3cret, s3cret]}}\n")
    assert "s3cret" not in str(caught.value)


async def test_a_port_in_use_is_a_clear_error(tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        [gateway] = build(tmp_path, f"gateways:\n  - {{kind: http, port: {port}}}\n")
        with pytest.raises(OSError, match=f"cannot listen on 127.0.0.1:{port}.*choose another port"):
            await gateway.start()


def test_accepted_connections_have_tcp_nodelay() -> None:
    """Without it every reused HTTP connection stalls ~40 ms (Nagle + delayed ACK)."""
    import socket

    from gateways.http.server import _bind

    listener = _bind("127.0.0.1", 0)
    listener.setblocking(True)
    try:
        with socket.create_connection(listener.getsockname()[:2]):
            accepted, _ = listener.accept()
            with accepted:
                assert listener.proto == socket.IPPROTO_TCP  # what asyncio checks before it sets NODELAY
                assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
    finally:
        listener.close()
