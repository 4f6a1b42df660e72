"""deploy/: its mosquitto.conf with the files ``mesh broker-config`` generates, on a real Mosquitto."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import pwd
import re
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from agents.service import AgentService
from mesh.broker import BrokerSettings, TlsOptions
from mesh.brokertools.brokerfiles import find_dynsec_plugin, identities_of, write_broker_files
from mesh.brokertools.localbroker import BrokerUnavailableError, LocalBroker, free_port
from mesh.cli.broker_commands import check_broker_log
from mesh.client import MeshClient
from mesh.component import Component
from mesh.config import load_config
from mesh.config.credentials import private_client_id, probe_client_id
from mesh.config.sections import build_components
from mesh.errors import AgentNameTakenError, ConnectError, SubscribeError
from mesh.transport import MqttTransport
from mesh.trust import generate_keys
from tests.mesh.cli_process import mesh

DEPLOY = Path(__file__).resolve().parent.parent / "deploy"
AGENTS = ["calculator", "countdown", "echo", "orchestrator"]


@pytest.fixture
def deploy_configs(tmp_path: Path, namespace: str) -> list[Path]:
    """deploy/'s configs on this test's namespace, with their keys: agents/<name>.yaml for each
    agent, then gateway.yaml (last)."""
    generate_keys(tmp_path / "keys", [*AGENTS, "http"])
    (tmp_path / "agents").mkdir()
    copies = []
    for name in [*(f"agents/{agent}.yaml" for agent in AGENTS), "gateway.yaml"]:
        copy = tmp_path / name
        copy.write_text((DEPLOY / name).read_text().replace("namespace: mesh", f"namespace: {namespace}"))
        copies.append(copy)
    return copies


def _agents_of(deploy_configs: list[Path], broker: BrokerSettings) -> list[Component]:
    return [c for path in deploy_configs[:-1] for c in build_components(load_config(path), broker)]


async def test_broker_config_puts_the_deploy_mesh_under_its_rules(
    broker_dir: Path, deploy_configs: list[Path], namespace: str
) -> None:
    generated = await mesh(
        "broker-config",
        *map(str, deploy_configs),
        "--out",
        str(broker_dir),
        "--broker-path",
        "/mosquitto/config",
        "--tls-host",
        "localhost",
        A2A_TOKEN="t",
    )
    assert generated.code == 0, generated.stderr
    assert "agent calculator, agent countdown, agent echo, agent orchestrator, client cli, gateway http" in (
        generated.stdout
    )
    credentials = broker_dir / "credentials"
    # One file each, and how many client ids the CLI user may use at once (mesh.clientids).
    assert sorted(p.name for p in credentials.iterdir()) == sorted([*AGENTS, "http", "cli", "cli.slots"])
    for secret in ("dynamic-security.json", "server.key", *(f"credentials/{n}" for n in [*AGENTS, "http", "cli"])):
        assert stat.S_IMODE((broker_dir / secret).stat().st_mode) == 0o600, secret
    assert not (broker_dir / "passwords").exists()  # no file holds every password
    with _deploy_broker(broker_dir) as broker:
        settings = BrokerSettings.from_url(
            f"mqtts://localhost:{broker.port}",
            tls=TlsOptions(ca_file=str(broker_dir / "ca.crt")),
            password_file=str(broker_dir / "credentials"),
        )
        agents = _agents_of(deploy_configs, settings)
        started: list[Component] = []
        try:
            for agent in agents:
                await agent.start()  # each as its own user (compose runs each in its own container)
                started.append(agent)
            with pytest.raises(AgentNameTakenError):
                await build_components(load_config(deploy_configs[0]), settings)[0].start()
            async with MeshClient.connect(settings.for_identity("cli"), namespace) as client:
                answer = await client.send("calculator", "6*7")
                assert "42" in str(answer.model_dump())
                with pytest.raises(SubscribeError):  # a client never reads an agent's requests
                    await client.transport.subscribe(f"{namespace}/a2a/v1/agent/request/echo", lambda m: None)
            calculator = settings.for_identity("calculator")
            with pytest.raises(ConnectError, match="Not authorized"):  # its user: its own client id only
                await MqttTransport(calculator).connect()
            with pytest.raises(SubscribeError):  # nor one agent another's (its rights, as its name check's user)
                own_id = private_client_id(f"{namespace}/calculator", calculator.password)
                rogue = MqttTransport(
                    dataclasses.replace(calculator, username="calculator@probe"), client_id=probe_client_id(own_id)
                )
                await rogue.connect()
                try:
                    await rogue.subscribe(f"{namespace}/a2a/v1/agent/request/echo", lambda m: None)
                finally:
                    await rogue.close()
        finally:
            for agent in reversed(started):
                await agent.stop()


def _write_deploy_broker_files(directory: Path, deploy_configs: list[Path]) -> None:
    """What ``mesh broker-config`` writes for deploy/'s configs (as in its README), in this process."""
    configs = [*map(load_config, deploy_configs[:-1]), load_config(deploy_configs[-1], environ={"A2A_TOKEN": "t"})]
    write_broker_files(directory, identities_of(configs), broker_path="/mosquitto/config", tls_hosts=["localhost"])


def test_deploy_mosquitto_starts_and_restarts_without_a_warning(broker_dir: Path, deploy_configs: list[Path]) -> None:
    _write_deploy_broker_files(broker_dir, deploy_configs)
    # Mosquitto block-buffers stdout into a file (lost if it is stopped early); its own log file is
    # written line by line.
    log = broker_dir / "deploy-mosquitto.log"
    with _deploy_broker(broker_dir, log_file=log) as broker:
        _wait_for_lines(log, " running", 1)
        broker.stop()
        broker.start()  # a restart also loads the persisted store
        _wait_for_lines(log, " running", 2)
        broker.stop()
        lines = log.read_text().splitlines()
    # What each start printed up to "running": the config, plugin, certificate and listeners. Later
    # lines are about connections (LocalBroker's readiness check hangs up before a TLS handshake).
    starting, startup = False, []
    for line in lines:
        starting = starting or " starting" in line
        if starting:
            startup.append(line)
            starting = " running" not in line
    assert sum(" running" in line for line in startup) == 2, lines
    assert [line for line in startup if re.search(r"warning|error|unable|denied", line, re.IGNORECASE)] == []


@pytest.mark.skipif(os.geteuid() != 0, reason="only a Mosquitto started by root drops to user 'mosquitto'")
def test_a_server_key_the_broker_user_cannot_read_stops_mosquitto(broker_dir: Path, deploy_configs: list[Path]) -> None:
    """Why the README says to chown the key: root's 0600 file, and Mosquitto (user mosquitto) cannot start."""
    _write_deploy_broker_files(broker_dir, deploy_configs)
    # Whichever of the two root-owned 0600 files Mosquitto reports first (the key, or the rules).
    unreadable = r"Unable to load server key file|Dynamic security plugin config: File is not readable"
    with pytest.raises(BrokerUnavailableError, match=unreadable):  # noqa: SIM117
        with _deploy_broker(broker_dir, own_secrets=False):
            pass


def test_compose_mounts_what_the_broker_and_the_components_read() -> None:
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    conf = (DEPLOY / "mosquitto" / "mosquitto.conf").read_text()
    mounted = {volume.split(":")[1] for volume in compose["services"]["mosquitto"]["volumes"]}
    for path in re.findall(r"^(?:certfile|keyfile|plugin_opt_config_file) (\S+)$", conf, re.MULTILINE):
        assert path in mounted, path
    for service in set(compose["services"]) - {"mosquitto"}:
        environment = compose["services"][service]["environment"]
        assert environment["MESH_BROKER_URL"].startswith("mqtts://")
        assert environment["MESH_BROKER_CA_FILE"] == "/run/secrets/ca.crt"
        assert environment["MESH_BROKER_PASSWORD_FILE"] == environment["MESH_KEYS_DIR"] == "/run/secrets"
        assert "ca.crt" in compose["services"][service]["secrets"]


def test_the_deploy_configs_load_with_signed_cards_and_user_tokens(deploy_configs: list[Path]) -> None:
    broker = BrokerSettings.from_url("mqtt://127.0.0.1:1883")
    agents = _agents_of(deploy_configs, broker)
    assert [c.name for c in agents] == AGENTS  # one file each
    assert all(isinstance(a, AgentService) and a.trust is not None and a.trust.token_issuers for a in agents)
    gateway = build_components(load_config(deploy_configs[-1], environ={"A2A_TOKEN": "t"}), broker)
    assert [(c.kind, c.name) for c in gateway] == [("gateway", "http")]


def test_compose_runs_each_component_in_a_service_of_its_own_that_holds_only_its_own_secrets(tmp_path: Path) -> None:
    """A compromised container holds no other component's password or signing key, nor the broker's
    hashes: each service runs one component (read from the config file its command runs), gets that
    component's secrets only, and nothing in it (secrets, volumes, environment, command) names another
    component's password file or key."""
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    secrets = compose["secrets"]
    generate_keys(tmp_path, [*AGENTS, "http"])  # what the services find in MESH_KEYS_DIR
    services = compose["services"].items()
    runs = {name: _components_of_service(spec, tmp_path) for name, spec in services if name != "mosquitto"}
    assert sorted(c for components in runs.values() for c in components) == sorted([*AGENTS, "http"])
    for service, components in runs.items():
        assert len(components) == 1, f"service {service} runs {components}, and so holds each one's secrets"
        [own] = components
        spec = compose["services"][service]
        assert set(spec["secrets"]) == {"ca.crt", "jwks.json", own, f"{own}.jwk"}, service
        assert secrets[own]["file"] == f"./broker/credentials/{own}"
        assert secrets[f"{own}.jwk"]["file"] == f"./keys/{own}.jwk"
        named = _strings({k: v for k, v in spec.items() if k != "build"}) | {
            secrets[name]["file"] for name in spec["secrets"]
        }
        for other in {*AGENTS, "http"} - {own}:
            files = (f"credentials/{other}", f"keys/{other}.jwk", f"secrets/{other}")
            leaked = [s for s in named if s in (other, f"{other}.jwk", f"{other}.slots") or any(f in s for f in files)]
            assert leaked == [], f"service {service} ({own}) names {other}'s secrets: {leaked}"
        mounted = " ".join(spec["volumes"])
        assert "broker/" not in mounted and "keys/" not in mounted, mounted  # nothing beside the secrets
    broker = " ".join(compose["services"]["mosquitto"]["volumes"])
    assert "credentials" not in broker and "dynamic-security.json" in broker


def _components_of_service(spec: dict[str, Any], keys: Path) -> list[str]:
    """The components a compose service runs: those of the config files its ``mesh run`` command
    names, read from the deploy/ files its volumes mount there (``MESH_KEYS_DIR``: ``keys``)."""
    assert spec["command"][0] == "run", spec["command"]
    mounts = {target: source for source, target, *_ in (volume.split(":") for volume in spec["volumes"])}
    broker = BrokerSettings.from_url("mqtt://127.0.0.1:1883")
    names = []
    for target in spec["command"][1:]:
        config = load_config(DEPLOY / mounts[target], environ={"A2A_TOKEN": "t", "MESH_KEYS_DIR": str(keys)})
        names += [component.name for component in build_components(config, broker)]
    return names


def _strings(value: Any) -> set[str]:
    """Every string in a parsed YAML value (keys too)."""
    if isinstance(value, str):
        return {value}
    if isinstance(value, dict):
        return {s for k, v in value.items() for s in _strings(k) | _strings(v)}
    if isinstance(value, list):
        return {s for item in value for s in _strings(item)}
    return set()


def _wait_for_lines(log: Path, text: str, count: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not (log.is_file() and log.read_text().count(text) >= count):
        assert time.monotonic() < deadline, f"{count} x {text!r} not in {log} within {timeout:g} s"
        time.sleep(0.05)


@contextlib.contextmanager
def _deploy_broker(directory: Path, *, own_secrets: bool = True, log_file: Path | None = None) -> Iterator[LocalBroker]:
    """Mosquitto from deploy/mosquitto/mosquitto.conf, its container paths pointed at ``directory``."""
    conf = (DEPLOY / "mosquitto" / "mosquitto.conf").read_text()
    conf = conf.replace("/usr/lib/mosquitto_dynamic_security.so", find_dynsec_plugin())
    conf = conf.replace("/mosquitto/config/", f"{directory}/").replace("/mosquitto/data/", f"{directory}/data/")
    if log_file is not None:
        conf = conf.replace("\nlog_dest stdout\n", f"\nlog_dest file {log_file}\n")
    (directory / "data").mkdir(mode=0o777)
    (directory / "data").chmod(0o777)
    if own_secrets and os.geteuid() == 0:  # as the README has it: the broker's user owns the two 0600 files it reads
        user = pwd.getpwnam("mosquitto")
        for secret in ("dynamic-security.json", "server.key"):
            os.chown(directory / secret, user.pw_uid, user.pw_gid)
    config = directory / "deploy-mosquitto.conf"
    config.write_text(conf)
    try:
        broker = LocalBroker(config, port=free_port())
    except BrokerUnavailableError as exc:
        pytest.skip(f"needs the mosquitto binary: {exc}")
    try:
        broker.start()
        check_broker_log(broker, directory / "dynamic-security.json")
        yield broker
    finally:
        broker.remove()
