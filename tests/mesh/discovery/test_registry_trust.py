"""A registry with a trust store on the real broker: only signed cards on their own topic."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from joserfc import jwk

from mesh.discovery.registry import DiscoveryRegistry
from mesh.trust import CardVerifier, generate_keys, load_private_key, load_public_keys, sign_card
from tests.conftest import TransportFactory
from tests.mesh.discovery.test_registry import Watch
from tests.mesh.test_trust import card


@pytest.fixture
def keys(tmp_path: Path) -> Path:
    generate_keys(tmp_path, ["echo", "calc", "evil"])
    return tmp_path


@pytest.fixture
async def trusting(make_transport: TransportFactory, namespace: str, keys: Path) -> AsyncIterator[Watch]:
    verifier = CardVerifier(load_public_keys(keys / "jwks.json"))
    registry = DiscoveryRegistry(await make_transport(), namespace, verifier=verifier)
    await registry.start()
    yield Watch(registry)
    await registry.stop()


def topic(namespace: str, name: str | None) -> str:
    return f"{namespace}/a2a/v1/discovery/agentcards" + (f"/{name}" if name is not None else "")


async def test_only_cards_signed_by_their_own_trusted_key_on_their_own_topic_are_accepted(
    trusting: Watch, make_transport: TransportFactory, namespace: str, keys: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="mesh.discovery.registry")
    evil_key = load_private_key(keys / "evil.jwk")
    impostor = jwk.ECKey.generate_key("P-256", parameters={"kid": "echo"}, private=True)
    attacker = await make_transport()
    refused = [
        (topic(namespace, "evil"), card("evil").to_json_bytes()),  # unsigned
        (topic(namespace, "echo"), sign_card(card("echo"), impostor).to_json_bytes()),  # wrongly signed
        (topic(namespace, "echo"), sign_card(card("echo"), evil_key).to_json_bytes()),  # signed by another's key
        (topic(namespace, "echo"), sign_card(card("evil"), evil_key).to_json_bytes()),  # on another's topic
        (topic(namespace, None), sign_card(card("evil"), evil_key).to_json_bytes()),  # a bare heartbeat
        (topic(namespace, None), card("#").to_json_bytes()),  # named '#'
        (topic(namespace, "evil"), card("evil", "again").to_json_bytes()),  # the same name again: no new log line
    ]
    for where, payload in refused:
        await attacker.publish(where, payload, retain=where != topic(namespace, None))
    owner = await make_transport()
    await owner.publish(
        topic(namespace, "calc"), sign_card(card("calc"), load_private_key(keys / "calc.jwk")).to_json_bytes()
    )
    await trusting.next("added", "calc", 5)  # published after every refused card: they have all arrived
    assert trusting.registry.agent_names() == ["calc"] and trusting.registry.rejected == len(refused)
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("refused the card")]
    # Once per name and reason (a minute), not per arrival: evil's two unsigned cards make one line.
    assert len([line for line in lines if "'evil'" in line and "not signed" in line]) == 1, lines
    reasons = [line.split(": ", 1)[1] for line in lines]
    assert len(lines) == len(refused) - 1 and len(set(zip(lines, reasons, strict=True))) == len(lines), lines
    assert set(trusting.registry.refused) == {"evil", "echo", "#"}
    assert any("'echo'" in line for line in lines) and any("'#'" in line for line in lines)


async def test_a_refused_card_leaves_the_accepted_one_alone_and_a_signed_update_replaces_it(
    trusting: Watch, make_transport: TransportFactory, namespace: str, keys: Path
) -> None:
    key = load_private_key(keys / "echo.jwk")
    owner, attacker = await make_transport(), await make_transport()
    await owner.publish(topic(namespace, "echo"), sign_card(card("echo"), key).to_json_bytes(), retain=True)
    await trusting.next("added", "echo", 5)
    await attacker.publish(topic(namespace, "echo"), card("echo", "hijacked").to_json_bytes(), retain=True)
    await owner.publish(topic(namespace, "echo"), sign_card(card("echo", "v2"), key).to_json_bytes(), retain=True)
    updated = await trusting.next("updated", "echo", 5)
    assert updated.card is not None and updated.card.description == "v2"
    assert [e.type for e in trusting.events] == ["added", "updated"] and trusting.registry.rejected == 1


async def test_without_trust_a_card_off_its_own_topic_or_with_a_bad_name_is_still_ignored(
    make_transport: TransportFactory, namespace: str
) -> None:
    registry = DiscoveryRegistry(await make_transport(), namespace)
    await registry.start()
    watch = Watch(registry)
    try:
        attacker = await make_transport()
        await attacker.publish(topic(namespace, "echo"), card("evil").to_json_bytes(), retain=True)
        await attacker.publish(topic(namespace, None), card("#").to_json_bytes())
        await attacker.publish(topic(namespace, None), card("a/b").to_json_bytes())
        await attacker.publish(topic(namespace, None), card("sam_agent").to_json_bytes())  # a SAM heartbeat
        await watch.next("added", "sam_agent", 5)
        assert registry.agent_names() == ["sam_agent"] and registry.rejected == 3
    finally:
        await registry.stop()


async def test_without_trust_a_heartbeat_never_replaces_a_card_from_its_own_topic(
    make_transport: TransportFactory, namespace: str
) -> None:
    registry = DiscoveryRegistry(await make_transport(), namespace)
    await registry.start()
    watch = Watch(registry)
    try:
        owner, attacker = await make_transport(), await make_transport()
        await owner.publish(topic(namespace, "echo"), card("echo").to_json_bytes(), retain=True)
        await watch.next("added", "echo", 5)
        await attacker.publish(topic(namespace, None), card("echo", "poisoned").to_json_bytes())
        await attacker.publish(topic(namespace, None), card("sam_agent").to_json_bytes())
        await watch.next("added", "sam_agent", 5)  # sent after the poisoned heartbeat: that one has arrived
        entry = registry.get("echo")
        assert entry is not None and entry.card.description != "poisoned"
        assert [e.type for e in watch.events if e.name == "echo"] == ["added"]
    finally:
        await registry.stop()
