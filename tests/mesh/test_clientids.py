"""Slots (mesh.clientids): each connection of a user with slots holds one, by a lock of the state
dir, until it closes; a user without slots keeps the client id it is given."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mesh.broker import BrokerSettings
from mesh.clientids import (
    REPLICA_SLOT_ENV,
    SLOTS_SUFFIX,
    claim_slot,
    client_transport,
    connection_for,
    own_client_id,
    replica_connection,
    replica_slot,
)
from mesh.config.credentials import write_credentials
from mesh.errors import ConfigError, ConnectError


def _cli(tmp_path: Path, slots: int | None) -> BrokerSettings:
    credentials = write_credentials(tmp_path / "credentials", {"cli": "secret"})
    if slots is not None:
        (credentials / f"cli{SLOTS_SUFFIX}").write_text(f"{slots}\n")
    return BrokerSettings.from_url("mqtt://localhost:1", password_file=str(credentials)).for_identity("cli")


async def test_each_connection_holds_a_slot_of_its_own_until_it_closes(tmp_path: Path) -> None:
    cli = _cli(tmp_path, 3)
    own = own_client_id("client", "ns", "cli", "secret")
    first, second = client_transport(cli), client_transport(cli)
    assert [(t.settings.username, t.client_id) for t in (first, second)] == [("cli", own), ("cli@1", f"{own}@1")]
    third = connection_for(cli, "client", "ns", "cli", "random")
    assert (third.settings.username, third.client_id, third.slot) == ("cli@2", f"{own}@2", 2)
    with pytest.raises(ConnectError, match="all 3 connections broker user 'cli' may open at once are in use"):
        claim_slot(cli, own, "random")
    await first.close()  # never connected: closing still frees its slot
    again = client_transport(cli)
    assert (again.settings.username, again.client_id) == ("cli", own)
    third.release()
    fourth = claim_slot(cli, own, "random")
    assert fourth.slot == 2
    fourth.release()
    await second.close()
    await again.close()


def test_a_client_without_slots_takes_its_own_id_while_free_then_random_ones(tmp_path: Path) -> None:
    cli = _cli(tmp_path, None)
    own = own_client_id("client", "ns", "cli", "secret")
    first = connection_for(cli, "client", "ns", "cli", "random-1")
    second = connection_for(cli, "client", "ns", "cli", "random-2")
    assert [(c.settings.username, c.client_id) for c in (first, second)] == [("cli", own), ("cli", "random-2")]
    first.release()
    # An agent (not a replica) keeps its own id; no credentials: the id given.
    echo = BrokerSettings(username="echo", password="pw")
    assert connection_for(echo, "agent", "ns", "echo", "x").client_id == own_client_id("agent", "ns", "echo", "pw")
    assert connection_for(BrokerSettings(), "client", "ns", "cli", "x").client_id == "x"


def _countdown(tmp_path: Path, slots: int | None) -> BrokerSettings:
    credentials = write_credentials(tmp_path / "credentials", {"countdown": "secret"})
    if slots is not None:
        (credentials / f"countdown{SLOTS_SUFFIX}").write_text(f"{slots}\n")
    return BrokerSettings.from_url("mqtt://localhost:1", password_file=str(credentials)).for_identity("countdown")


def test_a_replica_takes_the_slot_the_variable_names_else_a_free_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    countdown = _countdown(tmp_path, 4)
    own = own_client_id("agent", "ns", "countdown", "secret")
    monkeypatch.setenv(REPLICA_SLOT_ENV, "2")
    named = replica_connection(countdown, own, "instance")
    assert (named.settings.username, named.client_id, named.slot) == ("countdown@2", f"{own}@2", 2)
    # Another process of this machine given the same slot: refused, not a session taken over.
    with pytest.raises(ConnectError, match=rf"slot 2 of broker user 'countdown' \({REPLICA_SLOT_ENV}=2\) is held"):
        replica_connection(countdown, own, "instance")
    monkeypatch.delenv(REPLICA_SLOT_ENV)
    # Unnamed replicas of the machine skip the named one's slot.
    free = [replica_connection(countdown, own, "instance") for _ in range(3)]
    assert [c.slot for c in free] == [0, 1, 3]
    for claimed in (named, *free):
        claimed.release()
    # Without slots (no .slots file) and no variable: the replica's own instance id.
    plain = replica_connection(_countdown(tmp_path / "old", None), own, "instance")
    assert (plain.settings.username, plain.client_id, plain.slot) == ("countdown", "instance", None)


@pytest.mark.parametrize("value", ["4", "-1", "x", "1.5"])
def test_a_slot_out_of_the_rules_range_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv(REPLICA_SLOT_ENV, value)
    expected = rf"{REPLICA_SLOT_ENV}='{re.escape(value)}' is not a slot of broker user 'countdown'"
    expected += ": give an integer from 0 to 3"
    with pytest.raises(ConfigError, match=expected):
        replica_slot(_countdown(tmp_path, 4))


def test_a_slot_named_where_the_rules_give_none_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(REPLICA_SLOT_ENV, "0")
    with pytest.raises(ConfigError, match=rf"{REPLICA_SLOT_ENV}='0': the rules give broker user 'countdown' no slots"):
        replica_slot(_countdown(tmp_path, None))
    monkeypatch.setenv(REPLICA_SLOT_ENV, " ")
    assert replica_slot(_countdown(tmp_path, None)) is None  # empty: unset
