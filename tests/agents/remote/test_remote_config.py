"""The ``remote:`` entry of the mesh YAML, and ``mesh add-remote`` writing one from a real card."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from agents.remote.agent import RemoteAgent
from agents.service import AgentService
from mesh.broker import BrokerSettings
from mesh.config import load_config
from mesh.config.sections import build_components
from mesh.errors import ConfigError
from tests.agents.remote.conftest import Remote

ROOT = Path(__file__).resolve().parents[3]


def build(tmp_path: Path, agents_yaml: str) -> RemoteAgent:
    path = tmp_path / "mesh.yaml"
    path.write_text(f"namespace: mesh\nagents:\n{agents_yaml}")
    [service] = build_components(load_config(path), BrokerSettings())
    assert isinstance(service, AgentService) and isinstance(service.agent, RemoteAgent)
    return service.agent


def test_the_issue_shape(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WEATHER_TOKEN", "tok-123")
    agent = build(
        tmp_path,
        "  - name: weather\n    remote:\n      card_url: https://example.org/.well-known/agent-card.json\n"
        "      auth: {type: bearer, token_env: WEATHER_TOKEN}\n      headers: {X-Team: mesh}\n"
        "      tls: {verify: false}\n      max_concurrent: 2\n",
    )
    assert agent.name == "weather" and agent.remote.max_concurrent == 2
    assert agent.remote.tls.verify is False and agent.remote.headers == {"X-Team": "mesh"}
    assert (
        "tok-123" not in repr(agent.remote)
        and "tok-123" not in agent.card(url="x", push_notifications=False).to_json_bytes().decode()
    )


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ("  - remote: {card_url: 'https://h/c.json'}\n", r"agents\[0\]\.name: a remote agent needs a name"),
        ("  - name: w\n    remote: {url: 'https://h/', card_url: 'https://h/c.json'}\n", "exactly one of card_url"),
        ("  - name: w\n    remote: {card_url: 'ftp://h/c.json'}\n", "not an http"),
        ("  - name: w\n    remote: {card_url: 'https://h/c.json', auth: {type: bearer}}\n", "needs token_env"),
        ("  - name: w\n    remote: {card_url: 'https://h/c.json', colour: red}\n", "colour"),
        ("  - name: w\n    remote: {card_url: 'https://h/c.json', tls: {ca_file: ca.pem}}\n", r"tls\.ca_file: no file"),
        (
            "  - name: w\n    class: agents.builtin.echo:EchoAgent\n    remote: {card_url: 'https://h/c.json'}\n",
            "not both",
        ),
    ],
)
def test_bad_entries_say_what_to_fix(tmp_path: Path, entry: str, expected: str) -> None:
    with pytest.raises(ConfigError, match=expected):
        build(tmp_path, entry)


def test_a_missing_secret_is_named_not_shown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_SUCH_TOKEN", raising=False)
    with pytest.raises(ConfigError, match=r"NO_SUCH_TOKEN.*is not set"):
        build(
            tmp_path,
            "  - name: w\n    remote:\n      card_url: https://h/c.json\n"
            "      auth: {type: bearer, token_env: NO_SUCH_TOKEN}\n",
        )


async def mesh(*args: str, cwd: Path) -> tuple[int, str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "mesh.cli",
        *args,
        cwd=cwd,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode or 0, out.decode(), err.decode()


async def test_mesh_add_remote_shows_the_card_and_writes_an_entry_that_builds(remote: Remote, tmp_path: Path) -> None:
    (tmp_path / "mesh.yaml").write_text(
        "# my mesh\nnamespace: mesh\nagents:\n  - class: agents.builtin.echo:EchoAgent\n"
    )
    code, out, err = await mesh("add-remote", f"http://127.0.0.1:{remote.port}", cwd=tmp_path)
    assert code == 0, err
    assert "weather: weather 2.1.0: Tells the weather" in out and "skill weather" in out
    assert f"HTTP+JSON 1.0 http://127.0.0.1:{remote.port}/rest" in out
    text = (tmp_path / "mesh.yaml").read_text()
    assert text.startswith("# my mesh\n")  # the rest of the file as it was
    _echo, weather = build_components(load_config(tmp_path / "mesh.yaml"), BrokerSettings())
    assert isinstance(weather, AgentService) and isinstance(weather.agent, RemoteAgent)
    assert weather.agent.remote.card_url == remote.card_url
    code, out, err = await mesh("add-remote", f"http://127.0.0.1:{remote.port}", cwd=tmp_path)
    assert code == 2 and "already has an agent named 'weather'" in err


async def test_mesh_add_remote_names_the_url_status_and_fix(remote: Remote, tmp_path: Path) -> None:
    code, _, err = await mesh("add-remote", f"http://127.0.0.1:{remote.port}/no/card.json", cwd=tmp_path)
    assert code == 2
    assert f"http://127.0.0.1:{remote.port}/no/card.json answered HTTP 404" in err and "card_url" in err
    assert not (tmp_path / "mesh.yaml").exists()
