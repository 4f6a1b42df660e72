"""``mesh doctor`` against the project's own Mosquitto: every check passes."""

from __future__ import annotations

from collections.abc import Callable

from mesh.brokertools.localbroker import LocalBroker
from tests.mesh.cli_process import mesh


async def test_the_projects_mosquitto_passes_every_check(make_broker: Callable[..., LocalBroker]) -> None:
    broker = make_broker()
    doctor = await mesh("doctor", "--broker", broker.url, timeout=120)
    assert doctor.code == 0, doctor.stdout + doctor.stderr
    lines = doctor.stdout.splitlines()
    assert len(lines) >= 20 and all(line.startswith("pass") for line in lines), doctor.stdout
    assert "the mesh can run fully here" in doctor.stderr


async def test_a_broker_that_is_not_there_is_exit_3() -> None:
    doctor = await mesh("doctor", "--broker", "mqtt://127.0.0.1:1", timeout=60)
    assert doctor.code == 3 and "cannot connect" in doctor.stderr and "Traceback" not in doctor.stderr
