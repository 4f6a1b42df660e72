"""TLS options (``--ca-file``, ``--cert``, ``--key``, ``--insecure``, YAML ``tls:``, URL query) against
real TLS Mosquitto brokers with a private CA, and the errors that say what is wrong."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
import textwrap
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import pytest

from agents.service import AgentService
from mesh.broker import BrokerSettings, TlsOptions
from mesh.brokertools.localbroker import BrokerUnavailableError, LocalBroker, default_config_path
from mesh.brokertools.tlscerts import ensure_certificates
from mesh.cli import main
from mesh.config import configured_tls, load_config
from mesh.errors import ConfigError, ConnectError
from mesh.transport import MqttTransport
from tests.agents.service_agents import Echo
from tests.mesh.cli_process import Result, mesh, start_mesh

needs_openssl = pytest.mark.skipif(shutil.which("openssl") is None, reason="certificates are made with openssl")
pytestmark = needs_openssl

# A CLI run that fails on a TLS problem: interpreter start-up plus at most a short probe, never
# the 10 s CONNACK wait of a connection left hanging.
_FAST_S = 8.0


@dataclass(frozen=True)
class Pki:
    ca: Path
    client_cert: Path
    client_key: Path
    rogue_cert: Path  # signed by a CA no broker trusts
    rogue_key: Path


@dataclass(frozen=True)
class TlsBrokers:
    pki: Pki
    tls_port: int  # TLS, any client (anonymous)
    mtls_port: int  # TLS, a client certificate signed by the CA required
    plain_port: int  # plain MQTT


def _client_certificate(directory: Path, ca_cert: Path, ca_key: Path, name: str) -> tuple[Path, Path]:
    cert, key, csr, ext = (directory / f"{name}{suffix}" for suffix in (".crt", ".key", ".csr", ".ext"))
    curve = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    subprocess.run(["openssl", "req", *curve, "-subj", f"/CN={name}", "-keyout", str(key), "-out", str(csr)],
                   check=True, capture_output=True)  # fmt: skip
    ext.write_text("extendedKeyUsage=clientAuth\nbasicConstraints=CA:FALSE\n")
    subprocess.run(["openssl", "x509", "-req", "-in", str(csr), "-CA", str(ca_cert), "-CAkey", str(ca_key),
                    "-CAcreateserial", "-days", "2", "-extfile", str(ext), "-out", str(cert)],
                   check=True, capture_output=True)  # fmt: skip
    return cert, key


def _broker(extra_config: str) -> LocalBroker:
    try:
        broker = LocalBroker(default_config_path(), extra_config=extra_config)
    except BrokerUnavailableError as exc:
        pytest.skip(f"needs the mosquitto binary: {exc}")
    broker.start()
    return broker


@pytest.fixture(scope="module")
def brokers() -> Iterator[TlsBrokers]:
    """A private CA; a TLS broker, a mutual-TLS one and a plain one, on free ports."""
    directory = Path(tempfile.mkdtemp(prefix="mesh-test-tls-"))
    directory.chmod(0o777)  # Mosquitto started by root reads its files as user 'mosquitto'
    started: list[LocalBroker] = []
    try:
        server = ensure_certificates(directory / "broker", ["localhost"])  # not 127.0.0.1: the mismatch case
        client_cert, client_key = _client_certificate(directory, server.ca_cert, directory / "broker" / "ca.key", "c1")
        rogue = ensure_certificates(directory / "rogue", ["localhost"])
        rogue_cert, rogue_key = _client_certificate(directory, rogue.ca_cert, directory / "rogue" / "ca.key", "rogue")
        (directory / "broker").chmod(0o755)
        if os.geteuid() == 0:
            user = pwd.getpwnam("mosquitto")
            os.chown(server.server_key, user.pw_uid, user.pw_gid)
        tls_lines = f"certfile {server.server_cert}\nkeyfile {server.server_key}\n"
        started.append(_broker(tls_lines))
        started.append(_broker(tls_lines + f"cafile {server.ca_cert}\nrequire_certificate true\n"))
        started.append(_broker(""))
        pki = Pki(server.ca_cert, client_cert, client_key, rogue_cert, rogue_key)
        yield TlsBrokers(pki, started[0].port, started[1].port, started[2].port)
    finally:
        for broker in started:
            broker.remove()
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
async def echo(brokers: TlsBrokers, namespace: str) -> AsyncIterator[AgentService]:
    """An echo agent on the TLS broker, in this process."""
    settings = BrokerSettings.from_url(
        f"mqtts://localhost:{brokers.tls_port}", tls=TlsOptions(ca_file=str(brokers.pki.ca))
    )
    service = AgentService(Echo(), broker=settings, namespace=namespace)
    await service.start()
    yield service
    await service.stop()


async def timed_mesh(*args: str, **env: str) -> tuple[Result, float]:
    started = time.monotonic()
    result = await mesh(*args, **env)
    return result, time.monotonic() - started


def _no_ca_env() -> dict[str, str]:
    # The machine's MESH_BROKER_CA_FILE, if any, must not decide what these runs trust.
    return {"MESH_BROKER_CA_FILE": ""}


# ---------------------------------------------------------------- connecting


async def test_send_and_agents_trust_the_ca_of_ca_file(brokers: TlsBrokers, echo: AgentService, namespace: str) -> None:
    url = f"mqtts://localhost:{brokers.tls_port}"
    ca = str(brokers.pki.ca)
    sent = await mesh("send", "echo", "hi", "--broker", url, "--ca-file", ca, "-n", namespace, **_no_ca_env())
    assert (sent.code, sent.stdout) == (0, "hi\n"), sent.stderr
    listed = await mesh("agents", "--broker", url, "--ca-file", ca, "-n", namespace, **_no_ca_env())
    assert listed.code == 0 and "echo" in listed.stdout, listed.stderr
    by_env = await mesh("send", "echo", "env", "--broker", url, "-n", namespace, MESH_BROKER_CA_FILE=ca)
    assert (by_env.code, by_env.stdout) == (0, "env\n"), by_env.stderr


async def test_the_ca_from_the_url_query(brokers: TlsBrokers, echo: AgentService, namespace: str) -> None:
    url = f"mqtts://localhost:{brokers.tls_port}?ca_file={quote(str(brokers.pki.ca))}"
    sent = await mesh("send", "echo", "by query", "--broker", url, "-n", namespace, **_no_ca_env())
    assert (sent.code, sent.stdout) == (0, "by query\n"), sent.stderr


async def test_the_ca_from_a_yaml_tls_section(brokers: TlsBrokers, namespace: str, tmp_path: Path) -> None:
    shutil.copy(brokers.pki.ca, tmp_path / "ca.crt")
    config = tmp_path / "agents.yaml"
    config.write_text(
        textwrap.dedent(f"""
        namespace: {namespace}
        broker: mqtts://localhost:{brokers.tls_port}
        tls:
          ca_file: ca.crt   # relative to this file
        agents:
          - class: tests.agents.service_agents:Echo
            name: parrot
        """)
    )
    run = await start_mesh("run", str(config), **_no_ca_env())  # run from the repository: ca.crt is not here
    try:
        await run.wait_for_line("running agent parrot")
        url = f"mqtts://localhost:{brokers.tls_port}"
        sent = await mesh("send", "parrot", "yaml", "--broker", url, "--ca-file", str(brokers.pki.ca), "-n", namespace)
        assert (sent.code, sent.stdout) == (0, "yaml\n"), sent.stderr
    finally:
        assert await run.stop() == 0, run.output


async def test_mutual_tls_with_cert_and_key(brokers: TlsBrokers, namespace: str) -> None:
    pki = brokers.pki
    url = f"mqtts://localhost:{brokers.mtls_port}"
    tls_args = ("--ca-file", str(pki.ca), "--cert", str(pki.client_cert), "--key", str(pki.client_key))
    listed = await mesh("agents", "--broker", url, *tls_args, "-n", namespace, **_no_ca_env())
    assert listed.code == 0, listed.stderr
    query = f"{url}?ca_file={quote(str(pki.ca))}&cert={quote(str(pki.client_cert))}&key={quote(str(pki.client_key))}"
    by_query = await mesh("agents", "--broker", query, "-n", namespace, **_no_ca_env())
    assert by_query.code == 0, by_query.stderr

    without, took = await timed_mesh("agents", "--broker", url, "--ca-file", str(pki.ca), "-n", namespace)
    assert without.code == 3 and took < _FAST_S, (took, without.stderr)
    assert "requires a client certificate" in without.stderr and "--cert FILE --key FILE" in without.stderr
    assert "Is it running" not in without.stderr and "Traceback" not in without.stderr

    rogue_args = ("--ca-file", str(pki.ca), "--cert", str(pki.rogue_cert), "--key", str(pki.rogue_key))
    refused, took = await timed_mesh("agents", "--broker", url, *rogue_args, "-n", namespace)
    assert refused.code == 3 and took < _FAST_S, (took, refused.stderr)
    assert f"refused the client certificate {pki.rogue_cert}" in refused.stderr, refused.stderr


async def test_insecure_connects_without_the_ca_and_warns(
    brokers: TlsBrokers, echo: AgentService, namespace: str
) -> None:
    url = f"mqtts://localhost:{brokers.tls_port}"
    sent = await mesh("send", "echo", "risky", "--broker", url, "--insecure", "-n", namespace, **_no_ca_env())
    assert (sent.code, sent.stdout) == (0, "risky\n"), sent.stderr
    assert "WARNING: TLS verification is off" in sent.stderr and "--ca-file" in sent.stderr
    by_query = await mesh("send", "echo", "q", "--broker", f"{url}?insecure=1", "-n", namespace, **_no_ca_env())
    assert by_query.code == 0 and "WARNING: TLS verification is off" in by_query.stderr
    checked = await mesh("send", "echo", "hi", "--broker", url, "-n", namespace, **_no_ca_env())
    assert checked.code == 3 and "WARNING" not in checked.stderr


# ---------------------------------------------------------------- errors that say what is wrong


async def test_an_untrusted_certificate_says_to_give_the_ca(brokers: TlsBrokers, namespace: str) -> None:
    url = f"mqtts://localhost:{brokers.tls_port}"
    result, took = await timed_mesh("agents", "--broker", url, "-n", namespace, **_no_ca_env())
    assert result.code == 3 and took < _FAST_S, (took, result.stderr)
    assert "certificate verification failed" in result.stderr and "--ca-file FILE" in result.stderr
    assert "Is it running" not in result.stderr and "Traceback" not in result.stderr

    wrong_ca = str(brokers.pki.rogue_cert)  # a certificate, but not of the broker's CA
    other, _ = await timed_mesh("agents", "--broker", url, "--ca-file", wrong_ca, "-n", namespace)
    assert other.code == 3 and f"not signed by the CA file {wrong_ca}" in other.stderr, other.stderr


async def test_a_host_name_the_certificate_does_not_list(brokers: TlsBrokers, namespace: str) -> None:
    url = f"mqtts://127.0.0.1:{brokers.tls_port}"  # the certificate names localhost only
    result, took = await timed_mesh("agents", "--broker", url, "--ca-file", str(brokers.pki.ca), "-n", namespace)
    assert result.code == 3 and took < _FAST_S, (took, result.stderr)
    assert "not valid for the host name '127.0.0.1'" in result.stderr, result.stderr


async def test_plain_mqtt_to_a_tls_port_fails_fast_and_says_use_mqtts(brokers: TlsBrokers, namespace: str) -> None:
    url = f"mqtt://localhost:{brokers.tls_port}"
    result, took = await timed_mesh("agents", "--broker", url, "-n", namespace, **_no_ca_env())
    assert result.code == 3 and took < _FAST_S, (took, result.stderr)
    assert "this port speaks TLS; use mqtts://" in result.stderr, result.stderr

    started = time.monotonic()  # the transport itself, with its default 10 s CONNACK timeout
    with pytest.raises(ConnectError, match="this port speaks TLS"):
        await MqttTransport(BrokerSettings.from_url(url)).connect()
    assert time.monotonic() - started < _FAST_S  # told at once, not after the CONNACK timeout


async def test_tls_to_a_plain_port_says_use_mqtt(brokers: TlsBrokers, namespace: str) -> None:
    url = f"mqtts://localhost:{brokers.plain_port}"
    result, took = await timed_mesh("agents", "--broker", url, "--ca-file", str(brokers.pki.ca), "-n", namespace)
    assert result.code == 3 and took < _FAST_S, (took, result.stderr)
    assert "this port does not speak TLS; use mqtt://" in result.stderr, result.stderr
    assert "Is it running" not in result.stderr


def test_missing_or_bad_files_are_named_before_connecting(
    brokers: TlsBrokers, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"mqtts://localhost:{brokers.tls_port}"

    def run(*args: str) -> tuple[int, str]:  # in this process: no connection is made
        code = main(list(args))
        return code, capsys.readouterr().err

    code, err = run("agents", "--broker", url, "--ca-file", str(tmp_path / "nope.crt"))
    assert code == 2 and f"--ca-file {tmp_path / 'nope.crt'}: file not found" in err, err
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    code, err = run("agents", "--broker", url, "--ca-file", str(garbage))
    assert code == 2 and "--ca-file" in err and "cannot load it as CA" in err, err
    code, err = run("agents", "--broker", url, "--cert", str(garbage), "--key", str(garbage))
    assert code == 2 and f"--cert (YAML tls.cert, URL ?cert=) {garbage}" in err, err
    code, err = run("agents", "--broker", url, "--key", str(brokers.pki.client_key))
    assert code == 2 and "give --cert too" in err, err
    code, err = run("agents", "--broker", f"{url}?cafile=x")
    assert code == 2 and "did you mean 'ca_file'?" in err, err
    code, err = run("agents", "--broker", f"mqtt://localhost:{brokers.plain_port}", "--insecure")
    assert code == 2 and "use an mqtts:// URL" in err, err
    with pytest.raises(SystemExit):
        main(["send", "--help"])
    assert "DANGEROUS" in " ".join(capsys.readouterr().out.split())


# ---------------------------------------------------------------- parsing


def test_url_query_options_and_their_precedence(tmp_path: Path) -> None:
    ca, cert = tmp_path / "ca.crt", tmp_path / "c.crt"
    ca.write_text("x")
    cert.write_text("x")
    settings = BrokerSettings.from_url(f"mqtts://h:8883?ca_file={ca}&cert={cert}&insecure=true&keepalive=9")
    assert settings.tls == TlsOptions(ca_file=str(ca), cert_file=str(cert), insecure=True)
    assert settings.keepalive_s == 9 and settings.url == "mqtts://h:8883"
    given = BrokerSettings.from_url(f"mqtts://h?ca_file={ca}", tls=TlsOptions(ca_file=str(cert)))
    assert given.tls is not None and given.tls.ca_file == str(cert)  # an option given apart wins
    with pytest.raises(ConfigError, match="plain mqtt:// URL; use mqtts://h:1883"):
        BrokerSettings.from_url(f"mqtt://h:1883?ca_file={ca}")
    with pytest.raises(ConfigError, match=r"\?ca_file= .*nope: file not found"):
        BrokerSettings.from_url(f"mqtts://h?ca_file={tmp_path / 'nope'}")
    with pytest.raises(ConfigError, match="insecure='maybe'"):
        BrokerSettings.from_url("mqtts://h?insecure=maybe")


def test_yaml_tls_section_is_checked(tmp_path: Path) -> None:
    (tmp_path / "certs").mkdir()
    (tmp_path / "certs" / "ca.crt").write_text("x")
    config = tmp_path / "mesh.yaml"

    def load(body: str) -> object:
        config.write_text(textwrap.dedent(body))
        return load_config(config)

    loaded = load("broker: mqtts://h:8883\ntls:\n  ca_file: certs/ca.crt\n  insecure: true\n")
    assert loaded.tls == TlsOptions(ca_file=str(tmp_path / "certs" / "ca.crt"), insecure=True)  # type: ignore[attr-defined]
    assert configured_tls([loaded]) == loaded.tls  # type: ignore[list-item,attr-defined]
    cases = {
        "tls:\n  ca_fle: certs/ca.crt\n": "tls.ca_fle: unknown key 'ca_fle'; did you mean 'ca_file'?",
        "tls:\n  ca_file: certs/none.crt\n": "tls.ca_file: ",
        "tls:\n  insecure: yes please\n": "tls.insecure: expected true or false",
        "tls: ca.crt\n": "tls: expected a mapping",
        "broker: mqtt://h:1883\ntls:\n  ca_file: certs/ca.crt\n": "tls: TLS options for the plain broker",
        "tls:\n  key: certs/ca.crt\n": "tls.key: a client key without its certificate",
    }
    for body, expected in cases.items():
        with pytest.raises(ConfigError) as caught:
            load(body)
        assert f"{config}: {expected}" in str(caught.value), str(caught.value)
    with pytest.raises(ConfigError, match=r"none\.crt: file not found"):
        load("tls:\n  ca_file: certs/none.crt\n")
