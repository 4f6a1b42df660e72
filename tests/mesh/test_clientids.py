"""Slots (mesh.clientids): each connection of a user with slots holds one, by a lock of the state
dir, until it closes; a user without slots keeps the client id it is given."""

from __future__ import annotations

from pathlib import Path

import pytest

from mesh.broker import BrokerSettings
from mesh.clientids import SLOTS_SUFFIX, claim_slot, client_transport, connection_for, own_client_id
from mesh.credentials import write_credentials
from mesh.errors import ConnectError


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
