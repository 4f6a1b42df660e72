"""Live trust: keys and token issuers added to or removed from their files while registries and
verifiers run (DESIGN, "Trust": a component started later is trusted within seconds, no restart).

The registry tests run on the real broker and wait on the registry's events and refusals; the
store, issuers and token tests need no broker and drive the rate limit with a clock of their own.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from joserfc import jwk

from mesh.discovery.registry import DiscoveryRegistry, RegistryEvent
from mesh.errors import ConfigError
from mesh.trust import (
    CardVerifier,
    TokenMinter,
    TokenVerifier,
    TrustedIssuers,
    TrustedKeys,
    add_token_issuers,
    generate_keys,
    load_private_key,
    load_trust,
    read_token_issuers,
    remove_keys,
    remove_token_issuers,
    sign_card,
)
from mesh.trust.files import MIN_CHECK_INTERVAL_S, POLL_INTERVAL_S
from tests.conftest import TransportFactory
from tests.mesh.discovery.test_registry_trust import topic
from tests.mesh.test_trust import card

#: DESIGN's bound: a change of the trust file reaches every running registry within this.
WITHIN_S = 2.0


class Clock:
    """A monotonic clock the test moves: what the rate limit of the file checks reads."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


class Watched:
    """A registry, its events and its refusals, awaitable."""

    def __init__(self, registry: DiscoveryRegistry) -> None:
        self.registry = registry
        self.events: list[RegistryEvent] = []
        self.refusals: list[tuple[str, str | None]] = []
        self._changed = asyncio.Event()
        registry.add_listener(self._on_event)
        registry.add_refusal_listener(self._on_refusal)

    def _on_event(self, event: RegistryEvent) -> None:
        self.events.append(event)
        self._changed.set()

    def _on_refusal(self, name: str, _kind: str, why: str | None) -> None:
        self.refusals.append((name, why))
        self._changed.set()

    async def until(self, done: Callable[[], bool], timeout: float = WITHIN_S) -> None:
        """Return once ``done()`` holds, checked after every event and refusal."""
        async with asyncio.timeout(timeout):
            while not done():
                self._changed.clear()
                await self._changed.wait()

    async def event(self, type_: str, name: str, *, after: int = 0, timeout: float = WITHIN_S) -> RegistryEvent:
        """The first ``type_`` event of ``name`` among the events from index ``after`` on."""
        found: list[RegistryEvent] = []

        def seen() -> bool:
            found[:] = [e for e in self.events[after:] if e.type == type_ and e.name == name]
            return bool(found)

        await self.until(seen, timeout)
        return found[0]

    async def refused(self, name: str, needle: str, timeout: float = WITHIN_S) -> None:
        await self.until(lambda: any(n == name and needle in (why or "") for n, why in self.refusals), timeout)


@pytest.fixture
def keys(tmp_path: Path) -> Path:
    directory = tmp_path / "keys"
    generate_keys(directory, ["echo", "calc"])
    return directory


@pytest.fixture
async def watched(make_transport: TransportFactory, namespace: str, keys: Path) -> AsyncIterator[Watched]:
    verifier = CardVerifier(TrustedKeys(keys / "jwks.json"))  # file-backed, as `mesh up` gives every registry
    registry = DiscoveryRegistry(await make_transport(), namespace, verifier=verifier)
    await registry.start()
    yield Watched(registry)
    await registry.stop()


def signed(name: str, key: jwk.ECKey | jwk.OKPKey, description: str = "live") -> bytes:
    return sign_card(card(name, description), key).to_json_bytes()


def own_key(keys: Path, name: str, tmp_path: Path) -> jwk.ECKey | jwk.OKPKey:
    """The private key of ``name`` written into ``keys`` the way generate_keys writes it first,
    before the JWKS lists it (the moment a `mesh run` component already signs with it)."""
    elsewhere = tmp_path / "elsewhere"
    generate_keys(elsewhere, [name])
    shutil.copy2(elsewhere / f"{name}.jwk", keys / f"{name}.jwk")
    return load_private_key(keys / f"{name}.jwk")


def put(path: Path, text: str) -> None:
    """``text`` as the whole file at once: a watcher sees this content, never an empty moment."""
    temporary = path.with_name(path.name + ".new")
    temporary.write_text(text)
    os.replace(temporary, path)


# --- registries on the broker --------------------------------------------------------------------


async def test_a_card_refused_for_an_unknown_key_is_admitted_when_the_key_joins_the_file(
    watched: Watched, make_transport: TransportFactory, namespace: str, keys: Path, tmp_path: Path
) -> None:
    key = own_key(keys, "mine", tmp_path)
    owner = await make_transport()
    await owner.publish(topic(namespace, "mine"), signed("mine", key), retain=True)
    await watched.refused("mine", "not among the trusted keys")
    assert watched.registry.get("mine") is None
    generate_keys(keys, ["mine"])  # keeps the key, lists it in jwks.json: what `mesh run` enrollment does
    added = await watched.event("added", "mine")  # the held card, with no republish
    assert added.card is not None and added.card.description == "live"
    assert watched.refusals[-1] == ("mine", None) and "mine" not in watched.registry.refused


async def test_a_card_published_just_after_its_key_joined_is_accepted_at_once(
    watched: Watched, make_transport: TransportFactory, namespace: str, keys: Path
) -> None:
    generate_keys(keys, ["mine"])
    owner = await make_transport()
    await owner.publish(topic(namespace, "mine"), signed("mine", load_private_key(keys / "mine.jwk")), retain=True)
    await watched.event("added", "mine")
    assert watched.refusals == []  # its unknown kid looked at the file at once: never refused


async def test_a_card_refused_then_published_again_after_its_key_joined_passes(
    watched: Watched, make_transport: TransportFactory, namespace: str, keys: Path, tmp_path: Path
) -> None:
    key = own_key(keys, "mine", tmp_path)
    owner = await make_transport()
    await owner.publish(topic(namespace, "mine"), signed("mine", key, "v1"), retain=True)
    await watched.refused("mine", "not among the trusted keys")
    generate_keys(keys, ["mine"])
    await owner.publish(topic(namespace, "mine"), signed("mine", key, "v2"), retain=True)
    # v2 replaced the held v1 on arrival; a look at the file in between may have admitted v1 first.
    await watched.until(lambda: (entry := watched.registry.get("mine")) is not None and entry.card.description == "v2")
    assert "mine" not in watched.registry.refused


async def test_a_key_removed_from_the_file_removes_its_card(
    watched: Watched, make_transport: TransportFactory, namespace: str, keys: Path
) -> None:
    owner = await make_transport()
    await owner.publish(topic(namespace, "echo"), signed("echo", load_private_key(keys / "echo.jwk")), retain=True)
    await owner.publish(topic(namespace, "calc"), signed("calc", load_private_key(keys / "calc.jwk")), retain=True)
    await watched.event("added", "calc")
    await watched.event("added", "echo")
    assert remove_keys(keys, ["echo"]) == [keys / "echo.jwk"]
    removed = await watched.event("removed", "echo")
    assert removed.reason == "untrusted" and watched.registry.agent_names() == ["calc"]
    assert "not among the trusted keys" in watched.registry.refused["echo"][1]
    assert not (keys / "echo.jwk").exists() and remove_keys(keys, ["echo"]) == []  # gone already: nothing to do


async def test_a_replaced_key_drops_the_old_card_and_accepts_the_card_signed_with_the_new_one(
    watched: Watched, make_transport: TransportFactory, namespace: str, keys: Path
) -> None:
    owner = await make_transport()
    await owner.publish(topic(namespace, "echo"), signed("echo", load_private_key(keys / "echo.jwk"), "old"))
    await watched.event("added", "echo")
    generate_keys(keys, ["echo"], overwrite=True)
    removed = await watched.event("removed", "echo")
    assert removed.reason == "untrusted"
    assert "does not match" in watched.registry.refused["echo"][1]
    mark = len(watched.events)
    await owner.publish(topic(namespace, "echo"), signed("echo", load_private_key(keys / "echo.jwk"), "new"))
    added = await watched.event("added", "echo", after=mark)
    assert added.card is not None and added.card.description == "new" and "echo" not in watched.registry.refused


async def test_a_card_signed_by_a_key_that_is_not_in_the_file_stays_refused(
    watched: Watched, make_transport: TransportFactory, namespace: str, keys: Path
) -> None:
    ghost = jwk.ECKey.generate_key("P-256", parameters={"kid": "ghost"}, private=True)
    impostor = jwk.ECKey.generate_key("P-256", parameters={"kid": "echo"}, private=True)
    attacker = await make_transport()
    await attacker.publish(topic(namespace, "ghost"), signed("ghost", ghost), retain=True)
    await attacker.publish(topic(namespace, "echo"), signed("echo", impostor), retain=True)
    await watched.refused("ghost", "not among the trusted keys")
    await watched.refused("echo", "does not match")
    # The file changes (a real key of the name ghost too), and is read again, more than once.
    generate_keys(keys, ["ghost", "other"])
    owner = await make_transport()
    await owner.publish(topic(namespace, "other"), signed("other", load_private_key(keys / "other.jwk")))
    await watched.event("added", "other")
    await watched.refused("ghost", "does not match")  # checked again under the new keys: still no
    assert watched.registry.verifier is not None and not watched.registry.verifier.refresh()
    assert watched.registry.agent_names() == ["other"]
    assert "does not match" in watched.registry.refused["echo"][1]


async def test_a_malformed_or_half_written_jwks_keeps_the_keys_and_warns_once(
    watched: Watched,
    make_transport: TransportFactory,
    namespace: str,
    keys: Path,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="mesh.trust")
    owner = await make_transport()
    await owner.publish(topic(namespace, "echo"), signed("echo", load_private_key(keys / "echo.jwk")), retain=True)
    await watched.event("added", "echo")
    jwks = keys / "jwks.json"
    good = jwks.read_text()
    put(jwks, good[: len(good) // 2])  # half a file, as a writer without os.replace leaves it
    key = own_key(keys, "mine", tmp_path)
    await owner.publish(topic(namespace, "mine"), signed("mine", key), retain=True)  # a miss reads the bad file
    await watched.refused("mine", "not among the trusted keys")
    verifier = watched.registry.verifier
    assert verifier is not None
    for _ in range(3):
        assert not verifier.refresh()
    assert watched.registry.agent_names() == ["echo"]
    put(jwks, "not json at all")
    for _ in range(3):
        assert not verifier.refresh()
    warnings = [r.getMessage() for r in caplog.records if r.name == "mesh.trust"]
    assert len(warnings) == 2 and all("keeping the JWKS read before" in w for w in warnings), warnings
    generate_keys(keys, ["mine"])  # a good file again: read, and the held card admitted
    await watched.event("added", "mine")
    assert watched.registry.agent_names() == ["echo", "mine"]


async def test_refused_cards_held_for_their_key_are_bounded_oldest_out(
    make_transport: TransportFactory, namespace: str, keys: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("mesh.discovery.refusals.MAX_HELD_CARDS", 2)
    verifier = CardVerifier(TrustedKeys(keys / "jwks.json"))
    registry = DiscoveryRegistry(await make_transport(), namespace, verifier=verifier)
    await registry.start()
    watched = Watched(registry)
    try:
        publisher = await make_transport()
        for name in ("a", "b", "c"):
            await publisher.publish(topic(namespace, name), signed(name, own_key(keys, name, tmp_path)))
        await watched.refused("c", "not among the trusted keys")
        await publisher.publish(topic(namespace, "u"), card("u").to_json_bytes())  # unsigned: never held
        await publisher.publish(topic(namespace, "b"), b"")  # its owner's will: its held card goes too
        await publisher.publish(topic(namespace, "echo"), signed("echo", load_private_key(keys / "echo.jwk")))
        await watched.event("added", "echo")  # published last: the others have arrived
        generate_keys(keys, [])  # a, b and c (their keys in the directory already) join the file
        await watched.event("added", "c")  # admitted in the same pass as a and b would have been
        assert registry.agent_names() == ["c", "echo"] and "a" in registry.refused
    finally:
        await registry.stop()


# --- the key store without a broker --------------------------------------------------------------


def test_a_miss_looks_at_the_file_at_once_but_at_most_once_per_interval(keys: Path) -> None:
    clock = Clock()
    store = TrustedKeys(keys / "jwks.json", clock=clock)
    assert store.live and store.generation == 0 and store.get("mine") is None
    generate_keys(keys, ["mine"])
    assert store.get("mine") is None  # looked a moment ago: the burst of misses costs one stat
    clock.now += 2 * MIN_CHECK_INTERVAL_S
    assert store.get("mine") is not None and store.generation == 1 and "mine" in store.thumbprints()
    generate_keys(keys, ["echo"])  # rewritten with the same keys: no change
    assert not store.refresh() and store.generation == 1
    remove_keys(keys, ["mine"])
    assert store.get("echo") is not None and store.get("mine") is not None  # a hit costs nothing, sees nothing
    assert store.refresh() and store.get("mine") is None and store.generation == 2


def test_a_missing_jwks_keeps_the_keys_warns_once_and_a_bad_start_is_an_error(
    keys: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="mesh.trust")
    store = TrustedKeys(keys / "jwks.json")
    (keys / "jwks.json").unlink()
    assert not store.refresh() and not store.refresh() and store.get("echo") is not None
    assert len([r for r in caplog.records if "cannot read it" in r.getMessage()]) == 1
    generate_keys(keys, ["calc"])
    assert not store.refresh()  # back, with the same keys
    with pytest.raises(ConfigError, match="cannot read"):
        TrustedKeys(keys / "missing.json")
    fixed = TrustedKeys(store.key_set)
    assert not fixed.live and not fixed.refresh() and fixed.get("nobody") is None


def test_generate_keys_from_six_processes_at_once_loses_no_key(tmp_path: Path) -> None:
    generate_keys(tmp_path, ["seed"])
    script = (
        "import sys\nfrom pathlib import Path\nfrom mesh.trust import generate_keys\n"
        "sys.stdin.readline()\n"  # every process is up (imports done) before any writes
        "for name in sys.argv[2:]:\n    generate_keys(Path(sys.argv[1]), [name])\n"
    )
    names = [[f"p{p}k{k}" for k in range(5)] for p in range(6)]
    processes = [
        subprocess.Popen([sys.executable, "-c", script, str(tmp_path), *batch], stdin=subprocess.PIPE)
        for batch in names
    ]
    for process in processes:
        assert process.stdin is not None
        process.stdin.write(b"go\n")
        process.stdin.close()
    reads = 0
    while any(process.poll() is None for process in processes):  # a reader meanwhile never sees half a file
        json.loads((tmp_path / "jwks.json").read_bytes())
        reads += 1
    assert [process.wait() for process in processes] == [0] * 6 and reads > 0
    listed = {key["kid"] for key in json.loads((tmp_path / "jwks.json").read_text())["keys"]}
    assert listed == {"seed", *(name for batch in names for name in batch)}
    assert all(stat.S_IMODE(os.stat(path).st_mode) == 0o600 for path in tmp_path.glob("*.jwk"))
    assert list(tmp_path.glob("*.tmp")) == [] and list(tmp_path.glob(".*.tmp")) == []


# --- token issuers and tokens --------------------------------------------------------------------


def test_the_issuers_file_is_written_atomically_and_read_with_comments(tmp_path: Path) -> None:
    path = tmp_path / "token-issuers.txt"
    assert read_token_issuers(path) == ()
    assert add_token_issuers(path, ["http", "web", "http"]) == ("http", "web")
    path.write_text(path.read_text() + "mcp  # the MCP gateway\n\n# a comment\n")
    assert add_token_issuers(path, ["web", "acp"]) == ("http", "web", "mcp", "acp")
    assert remove_token_issuers(path, ["web", "nobody"]) == ("http", "mcp", "acp")
    assert "# the MCP gateway" in path.read_text()
    with pytest.raises(ValueError, match="gateway id"):
        add_token_issuers(path, ["b#d"])


def test_trusted_issuers_follow_their_file_a_miss_looking_at_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock()
    path = tmp_path / "token-issuers.txt"
    issuers = TrustedIssuers(["http"], path, clock=clock)  # no file yet: no warning, only the settings' names
    assert "http" in issuers and "web" not in issuers and issuers.names == {"http"}
    clock.now += 2 * MIN_CHECK_INTERVAL_S
    add_token_issuers(path, ["web"])
    assert "web" in issuers and issuers.generation == 1
    path.write_text("web\nbad name\n")
    assert not issuers.refresh() and issuers.names == {"http", "web"}  # the bad line alone is ignored
    assert any("bad name" in r.getMessage() for r in caplog.records)
    remove_token_issuers(path, ["web"])
    assert issuers.refresh() and "web" not in issuers.names and 42 not in issuers


def test_a_token_verifies_once_its_issuer_and_key_join_and_fails_once_removed(tmp_path: Path) -> None:
    clock = Clock()
    keys, issuers_file = tmp_path / "keys", tmp_path / "token-issuers.txt"
    generate_keys(keys, ["echo"])
    verifier = TokenVerifier(
        TrustedKeys(keys / "jwks.json", clock=clock),
        issuers=TrustedIssuers((), issuers_file, clock=clock),
        audience="acme",
    )
    generate_keys(keys, ["web"])  # a gateway enrolled while the agent runs
    add_token_issuers(issuers_file, ["web"])
    token = TokenMinter(load_private_key(keys / "web.jwk"), issuer="web", audience="acme").mint("alice")
    identity = verifier.identify("alice", token)  # unknown issuer and kid: both files looked at once
    assert identity.verified and identity.issuer == "web" and "web" in verifier.issuers
    remove_token_issuers(issuers_file, ["web"])
    assert verifier.identify("alice", token).verified  # cached, and the files were looked at just now
    clock.now += POLL_INTERVAL_S  # the next verification looks again: the change drops the cache
    refused = verifier.identify("alice", token)
    assert not refused.verified and "not by a trusted issuer" in (refused.problem or "")


def test_a_change_of_keys_drops_the_verified_tokens(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    generate_keys(tmp_path, ["web"])
    verifier = TokenVerifier(TrustedKeys(tmp_path / "jwks.json"), issuers=["web"], audience="acme")
    minter = TokenMinter(load_private_key(tmp_path / "web.jwk"), issuer="web", audience="acme")
    token = minter.mint("alice")
    checks: list[str] = []
    from mesh.trust import tokens

    signed_by = tokens.signed_by
    monkeypatch.setattr(tokens, "signed_by", lambda t, k: checks.append(t) is None and signed_by(t, k))
    assert verifier.verify(token).verified and verifier.verify(token).verified and len(checks) == 1
    generate_keys(tmp_path, ["other"])  # any change: what was verified is checked again
    assert verifier.refresh() and verifier.verify(token).verified and len(checks) == 2
    generate_keys(tmp_path, ["web"], overwrite=True)  # the gateway's key replaced: its old tokens fail
    assert verifier.refresh()
    failed = verifier.identify("alice", token)
    assert not failed.verified and "does not verify" in (failed.problem or "")


def test_trust_settings_build_live_keys_and_issuers(tmp_path: Path) -> None:
    generate_keys(tmp_path / "keys", ["echo"])
    trust = load_trust("echo", {"keys": "keys", "token_issuers_file": "token-issuers.txt"}, base=tmp_path)
    assert trust is not None and trust.public_keys is not None and trust.public_keys.live
    assert trust.token_issuers_file == tmp_path / "token-issuers.txt"
    verifier = trust.card_verifier()
    tokens = trust.token_verifier("acme")
    assert verifier is not None and verifier.live and tokens is not None and tokens.issuers == frozenset()
    assert verifier.keys is tokens.keys  # one store: a registry's look serves the agent's tokens too


def test_importing_mesh_trust_and_writing_issuers_loads_no_jose_library(tmp_path: Path) -> None:
    code = (
        "import sys\nfrom pathlib import Path\nimport mesh.trust\n"
        "mesh.trust.add_token_issuers(Path(sys.argv[1]), ['web'])\n"
        "from mesh.trust import TrustedIssuers\nassert 'web' in TrustedIssuers((), Path(sys.argv[1]))\n"
        "print(sorted({n.split('.')[0] for n in sys.modules} & {'joserfc', 'cryptography'}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "issuers")], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"
