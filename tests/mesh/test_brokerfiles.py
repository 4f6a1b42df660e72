"""Broker users, passwords and rules from mesh configs (no broker: the files themselves)."""

from __future__ import annotations

import base64
import json
import stat
import textwrap
from pathlib import Path

import pytest

from mesh.broker import BrokerSettings
from mesh.brokertools.brokerfiles import identities_of, write_broker_files
from mesh.brokertools.brokerrules import Identity, rules_for
from mesh.brokertools.dynsec import hash_password
from mesh.clientids import CLIENT_SLOTS, SLOTS, own_client_id
from mesh.config import load_config
from mesh.config.credentials import password_for, read_credentials, read_passwords
from mesh.errors import ConfigError


def test_identities_come_from_the_components_of_the_configs(tmp_path: Path) -> None:
    config = tmp_path / "mesh.yaml"
    config.write_text(
        textwrap.dedent(
            """
            namespace: acme/ai
            agents:
              - class: agents.builtin.echo:EchoAgent
              - class: agents.builtin.echo:EchoAgent
                name: parrot
            gateways:
              - {kind: http, id: web, port: 0}
            """
        )
    )
    found = identities_of([load_config(config)], ["cli", "ops"])
    assert found == [
        Identity("agent", "echo", "acme/ai"),
        Identity("agent", "parrot", "acme/ai"),
        Identity("gateway", "web", "acme/ai"),
        Identity("client", "cli", "acme/ai"),
        Identity("client", "ops", "acme/ai"),
    ]


def test_files_are_private_and_passwords_survive_a_rerun(tmp_path: Path) -> None:
    (tmp_path / "passwords").write_text("echo:from-an-older-version\n")  # one file for all: read, then removed
    first = write_broker_files(tmp_path, [Identity("agent", "echo", "ns"), Identity("client", "cli", "ns")])
    assert not (tmp_path / "passwords").exists()
    # One file per component, holding its own password only: what a deployment mounts to it.
    assert stat.S_IMODE(first.passwords.stat().st_mode) == 0o700
    # The CLI user's slot count (mesh.clientids): how many client ids it may use at once.
    assert sorted(p.name for p in first.passwords.iterdir()) == ["cli", "cli.slots", "echo"]
    assert (first.passwords / "cli.slots").read_text() == f"{CLIENT_SLOTS}\n"
    for path in (first.passwords / "echo", first.passwords / "cli", first.dynsec):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert read_passwords(first.passwords / "echo") == {"echo": "from-an-older-version"}
    assert set(read_passwords(first.passwords / "cli")) == {"cli"}
    before = read_credentials(first.passwords)
    again = write_broker_files(tmp_path, [Identity("agent", "echo", "ns"), Identity("agent", "calc", "ns")])
    after = read_credentials(again.passwords)
    assert after["echo"] == before["echo"] and set(after) == {"echo", "calc"}  # cli is gone
    assert not (again.passwords / "cli").exists() and not (again.passwords / "cli.slots").exists()
    document = json.loads(again.dynsec.read_text())
    assert document["defaultACLAccess"] == {
        "publishClientSend": False,
        "publishClientReceive": False,
        "subscribe": False,
        "unsubscribe": True,
    }
    echo = next(c for c in document["clients"] if c["username"] == "echo")
    salt = base64.b64decode(echo["salt"])
    assert hash_password(after["echo"], salt=salt)["password"] == echo["password"]  # what the plugin checks
    assert f"plugin_opt_config_file {again.dynsec.resolve()}" in again.conf.read_text()


def test_static_rules_give_an_agent_run_as_replicas_slots_bound_as_under_mesh_up(tmp_path: Path) -> None:
    """``mesh broker-config`` (no admin user): each replica of countdown may connect in a slot of
    its own, the user ``countdown@{k}`` under ``<countdown's id>@{k}`` only, as under ``mesh up``."""
    files = write_broker_files(tmp_path, [Identity("agent", "countdown", "ns", replica=True)])
    assert sorted(p.name for p in files.passwords.iterdir()) == ["countdown", "countdown.slots"]
    assert (files.passwords / "countdown.slots").read_text() == f"{SLOTS}\n"
    own = own_client_id("agent", "ns", "countdown", read_credentials(files.passwords)["countdown"])
    clients = {c["username"]: c.get("clientid") for c in json.loads(files.dynsec.read_text())["clients"]}
    expected = {"countdown": own} | {f"countdown@{k}": f"{own}@{k}" for k in range(1, SLOTS)}
    assert {user: clients[user] for user in expected} == expected
    assert "countdown@probe" not in clients  # a replica checks no name: its name is shared


def test_one_name_of_two_kinds_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="agent 'http' and gateway 'http' would share the broker username"):
        write_broker_files(tmp_path, [Identity("agent", "http", "ns"), Identity("gateway", "http", "ns")])


def test_one_name_in_two_namespaces_gets_both_rule_sets(tmp_path: Path) -> None:
    files = write_broker_files(tmp_path, [Identity("agent", "echo", "a"), Identity("agent", "echo", "b")])
    role = json.loads(files.dynsec.read_text())["roles"][0]
    topics = {acl["topic"] for acl in role["acls"]}
    assert {"a/a2a/v1/agent/request/echo", "b/a2a/v1/agent/request/echo"} <= topics


def test_rules_confine_each_kind() -> None:
    client = rules_for(Identity("client", "cli", "ns"))
    # Requests to mesh agents, and to EMQX profile agents (named: a '+' never matches '$a2a').
    assert client.publish == [
        "ns/a2a/v1/agent/request/+",
        "ns/a2a/v1/agent/request/+/+",
        "ns/a2a/v1/rollcall",
        "ns/a2a/v1/discovery/rollcall",  # the legacy roll call, heard for one release (mesh.discovery.rollcall)
        "$a2a/v1/request/+/+/+",
        "$a2a/v1/request/+/+/pool/+",
    ]
    assert client.read[-2:] == ["$a2a/v1/discovery/+/+/+", "$a2a/v1/reply/+/+/cli/+"]
    gateway = rules_for(Identity("gateway", "web", "ns"))
    assert "ns/a2a/v1/discovery/gatewaycards/web" in gateway.publish
    assert not [t for t in gateway.publish if "/response/" in t or "/status/" in t]  # gateways never answer
    agent = rules_for(Identity("agent", "echo", "ns"))
    assert "$share/echo/ns/a2a/v1/agent/request/echo" in agent.read
    assert not [t for t in agent.read + agent.publish if t.startswith("#") or "/discovery/agentcards/+" in t]


def test_a_component_takes_its_own_password_from_the_file(tmp_path: Path) -> None:
    files = write_broker_files(tmp_path, [Identity("agent", "echo", "ns")])
    settings = BrokerSettings.from_url("mqtt://127.0.0.1:1883", password_file=str(files.passwords))
    echo = settings.for_identity("echo")
    assert (echo.username, echo.password) == ("echo", password_for(files.passwords, "echo"))
    shared = BrokerSettings.from_url("mqtt://svc:pw@127.0.0.1:1883", password_file=str(files.passwords))
    assert shared.for_identity("echo") is shared  # a user in the URL wins
    assert BrokerSettings().for_identity("echo").username is None  # no file: anonymous as before
    with pytest.raises(ConfigError, match=r"no broker credentials for 'ghost'.*mesh broker-config"):
        settings.for_identity("ghost")
    with pytest.raises(ConfigError, match="not found; generate it with `mesh broker-config"):
        password_for(tmp_path / "missing", "echo")
    (tmp_path / "bad").write_text("no colon here\n")
    with pytest.raises(ConfigError, match="line 1 is not 'name:password'"):
        read_passwords(tmp_path / "bad")
