"""mesh.trust without a broker: keys, card signatures, user tokens and the trust settings."""

from __future__ import annotations

import base64
import json
import os
import stat
from pathlib import Path

import pytest
from joserfc import jwk

from mesh.a2a import AgentCapabilities, AgentCard, AgentSkill
from mesh.cli import main
from mesh.errors import ConfigError, TrustError
from mesh.trust import (
    CardVerifier,
    TokenMinter,
    TokenVerifier,
    Trust,
    generate_keys,
    load_private_key,
    load_public_keys,
    load_trust,
    sign_card,
)
from mesh.trust.callers import CallerMinter, CallerVerifier
from mesh.trust.store import TrustedKeys


def card(name: str = "echo", description: str = "repeats — déjà vu") -> AgentCard:
    return AgentCard(
        name=name,
        description=description,
        version="1",
        url=f"mqtt://x/{name}",
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="s", name="S", description="s", tags=["t"])],
    )


@pytest.fixture
def keys(tmp_path: Path) -> Path:
    generate_keys(tmp_path, ["echo", "http", "evil"])
    return tmp_path


def wire(signed: AgentCard) -> dict[str, object]:
    data: dict[str, object] = json.loads(signed.to_json_bytes())
    return data


# --- keys ----------------------------------------------------------------------------------------


def test_mesh_keys_writes_private_keys_and_the_jwks_and_keeps_existing_keys(tmp_path: Path) -> None:
    assert main(["keys", "echo", "http", "--dir", str(tmp_path)]) == 0
    echo = (tmp_path / "echo.jwk").read_text()
    assert stat.S_IMODE(os.stat(tmp_path / "echo.jwk").st_mode) == 0o600
    public = json.loads((tmp_path / "jwks.json").read_text())["keys"]
    assert sorted(k["kid"] for k in public) == ["echo", "http"] and all("d" not in k for k in public)
    assert main(["keys", "orchestrator", "--dir", str(tmp_path)]) == 0  # adds one, keeps the others
    assert (tmp_path / "echo.jwk").read_text() == echo
    assert len(load_public_keys(tmp_path / "jwks.json").keys) == 3


def test_mesh_keys_refuses_a_bad_name_before_writing_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["keys", "echo", "b#d", "--dir", str(tmp_path / "k")]) == 2
    assert "'b#d'" in capsys.readouterr().err and not (tmp_path / "k").exists()


def test_a_pem_key_loads_with_its_file_name_as_kid(tmp_path: Path) -> None:
    key = jwk.ECKey.generate_key("P-256", private=True)
    (tmp_path / "web.pem").write_bytes(key.as_pem(private=True))
    assert load_private_key(tmp_path / "web.pem").kid == "web"


def test_unreadable_or_wrong_key_files_say_what_to_do(tmp_path: Path) -> None:
    (tmp_path / "x.jwk").write_text("{}")
    with pytest.raises(ConfigError, match="mesh keys"):
        load_private_key(tmp_path / "x.jwk")
    with pytest.raises(ConfigError, match="cannot read"):
        load_public_keys(tmp_path / "missing.json")


# --- cards ---------------------------------------------------------------------------------------


def test_a_signed_card_verifies_and_any_change_breaks_it(keys: Path) -> None:
    verifier = CardVerifier(load_public_keys(keys / "jwks.json"))
    signed = sign_card(card(), load_private_key(keys / "echo.jwk"))
    data = wire(signed)
    assert verifier.verify(data, "echo") == "echo"
    protected = json.loads(_b64(signed.signatures[0].protected))  # type: ignore[index]
    assert protected == {"alg": "ES256", "kid": "echo", "typ": "JOSE"}
    with pytest.raises(TrustError, match="does not match"):
        verifier.verify({**data, "url": "mqtt://evil/echo"}, "echo")


def test_unsigned_foreign_and_untrusted_signatures_are_refused(keys: Path, tmp_path: Path) -> None:
    verifier = CardVerifier(load_public_keys(keys / "jwks.json"))
    with pytest.raises(TrustError, match="not signed"):
        verifier.verify(wire(card()), "echo")
    # evil's own (trusted) key cannot vouch for echo's card
    with pytest.raises(TrustError, match="not by the card's own key 'echo'"):
        verifier.verify(wire(sign_card(card(), load_private_key(keys / "evil.jwk"))), "echo")
    # a key named echo that is not the trusted one
    impostor = jwk.ECKey.generate_key("P-256", parameters={"kid": "echo"}, private=True)
    with pytest.raises(TrustError, match="does not match"):
        verifier.verify(wire(sign_card(card(), impostor)), "echo")
    stranger = jwk.ECKey.generate_key("P-256", parameters={"kid": "stranger"}, private=True)
    with pytest.raises(TrustError, match="not among the trusted keys"):
        verifier.verify(wire(sign_card(card("stranger"), stranger)), "stranger")
    with pytest.raises(TrustError, match="protected header"):
        verifier.verify({**wire(card()), "signatures": [{"protected": "!!", "signature": "x"}]}, "echo")


# --- tokens --------------------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def test_tokens_verify_for_their_audience_and_issuer_until_they_expire(keys: Path) -> None:
    clock = Clock()
    minter = TokenMinter(
        load_private_key(keys / "http.jwk"), issuer="http", audience="acme", ttl_s=60, scopes=["a2a"], clock=clock
    )
    public = load_public_keys(keys / "jwks.json")
    verifier = TokenVerifier(public, issuers=["http"], audience="acme", leeway_s=0, clock=clock)
    token = minter.mint("alice")
    identity = verifier.identify("mallory", token)  # the token's subject wins over a claimed userId
    assert (identity.user_id, identity.verified, identity.issuer, identity.scopes) == ("alice", True, "http", ("a2a",))
    assert minter.mint("alice") == token  # reused while more than half its life is left
    clock.now += 31
    assert minter.mint("alice") != token
    clock.now += 30
    expired = verifier.identify("alice", token)
    assert not expired.verified and "expired" in (expired.problem or "")
    other = TokenVerifier(public, issuers=["http"], audience="other", clock=clock).identify("x", minter.mint("bob"))
    assert not other.verified and "audience" in (other.problem or "")


def test_untrusted_issuers_forged_and_garbled_tokens_are_unverified(keys: Path) -> None:
    public = load_public_keys(keys / "jwks.json")
    verifier = TokenVerifier(public, issuers=["http"], audience="acme")
    evil = TokenMinter(load_private_key(keys / "evil.jwk"), issuer="evil", audience="acme")
    impostor_key = jwk.ECKey.generate_key("P-256", parameters={"kid": "http"}, private=True)
    forged = TokenMinter(impostor_key, issuer="http", audience="acme")
    cases = {
        None: "no authToken",
        evil.mint("alice"): "not by a trusted issuer",
        forged.mint("alice"): "does not verify",
        "abc": "not a JWT",
        "a.b.c": "not base64url JSON",
    }
    for token, problem in cases.items():
        identity = verifier.identify("alice", token)
        assert identity == identity.__class__("alice", problem=identity.problem) and problem in (identity.problem or "")


def test_a_verified_token_is_verified_once_until_it_expires(keys: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    verifier = TokenVerifier(
        load_public_keys(keys / "jwks.json"), issuers=["http"], audience="acme", leeway_s=0, clock=clock
    )
    token = TokenMinter(load_private_key(keys / "http.jwk"), issuer="http", audience="acme", ttl_s=60, clock=clock)
    alice = token.mint("alice")
    assert verifier.verify(alice).verified
    with monkeypatch.context() as patched:  # no signature verifies: only the cache can answer
        patched.setattr("mesh.trust.tokens.signed_by", lambda _token, _key: False)
        assert verifier.verify(alice).user_id == "alice"
    clock.now += 60
    assert "expired" in (verifier.identify("alice", alice).problem or "")


def test_a_minter_needs_the_gateways_own_key(keys: Path) -> None:
    with pytest.raises(ValueError, match="issuer 'web'"):
        TokenMinter(load_private_key(keys / "http.jwk"), issuer="web", audience="acme")


# --- settings ------------------------------------------------------------------------------------


def test_trust_layers_merge_and_paths_are_relative_to_the_file(keys: Path) -> None:
    trust = load_trust("echo", {"keys": keys.name}, {"token_issuers": ["http"]}, base=keys.parent)
    assert isinstance(trust, Trust) and trust.signing_key is not None and trust.signing_key.kid == "echo"
    assert trust.token_issuers == ("http",) and trust.token_verifier("acme") is not None
    assert trust.card_verifier() is not None and trust.token_minter("acme") is not None
    nobody = load_trust("nobody", {"keys": str(keys)}, base=Path("/"))
    assert nobody is not None and nobody.signing_key is None and nobody.token_minter("acme") is None
    assert load_trust("echo", None, {}, base=keys) is None


def test_bad_trust_settings_name_the_key_and_a_foreign_key_is_refused(keys: Path) -> None:
    with pytest.raises(ConfigError, match="token_issuer"):
        load_trust("echo", {"token_issuer": ["http"]}, base=keys, source="mesh.yaml")
    with pytest.raises(ConfigError, match="kid is 'http', not 'echo'"):
        load_trust("echo", {"signing_key": str(keys / "http.jwk")}, base=keys)


def _b64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def test_a_caller_token_proves_its_signer_to_the_one_agent_it_is_for(tmp_path: Path) -> None:
    """mesh.trust.callers: what a verifier accepts, and every way a token fails (None, never a guess)."""
    generate_keys(tmp_path, ["cli", "calculator"])
    now = [1_000_000.0]
    keys = TrustedKeys(tmp_path / "jwks.json")
    echo = CallerVerifier(keys, namespace="ns", agent="echo", clock=lambda: now[0])
    cli_key = load_private_key(tmp_path / "cli.jwk", kid="cli")
    cli = CallerMinter(cli_key, kind="client", namespace="ns", clock=lambda: now[0])
    token = cli.mint("echo")
    assert echo.caller(token) == "client:cli"
    assert cli.mint("echo") == token  # cached while more than half its lifetime is left
    assert echo.caller(cli.mint("calculator")) is None  # another agent's token
    assert echo.caller(CallerMinter(cli_key, kind="client", namespace="other").mint("echo")) is None
    calculator_key = load_private_key(tmp_path / "calculator.jwk", kid="calculator")
    forged = CallerMinter(calculator_key, kind="client", namespace="ns")
    assert echo.caller(forged.mint("echo")) == "client:calculator"  # a kind claims nothing beyond its own name
    header, claims, signature = token.split(".")
    for bad in ("", "x", "a.b.c", f"{header}.{claims}.{signature[:-4]}AAAA", "x" * 5000, f"{header}..{signature}"):
        assert echo.caller(bad) is None, bad
    with pytest.raises(TrustError, match="expired"):
        now[0] += 400
        echo.verify(token)
