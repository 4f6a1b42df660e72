"""Secrets never show in a repr: a log line or a traceback that prints settings or options must
not carry the broker password, a bearer token or a user token."""

from __future__ import annotations

from mesh.broker import BrokerSettings
from mesh.calls import CallOptions
from mesh.e2a import E2AAuth, E2AEnvelope

SECRET = "s3cret-value-42"


def test_the_broker_password_is_not_in_the_settings_repr() -> None:
    for settings in (BrokerSettings(password=SECRET), BrokerSettings.from_url(f"mqtt://user:{SECRET}@localhost:1883")):
        assert settings.password == SECRET
        assert SECRET not in repr(settings) and SECRET not in str(settings)
        assert "user" in repr(BrokerSettings.from_url(f"mqtt://user:{SECRET}@localhost:1883"))


def test_an_e2a_bearer_token_is_not_in_the_auth_repr() -> None:
    auth = E2AAuth(bearer_token=SECRET, extra_headers={"Authorization": f"Bearer {SECRET}"})
    assert SECRET not in repr(auth)
    envelope = E2AEnvelope(auth=auth)
    assert SECRET not in repr(envelope)
    assert envelope.auth is not None and envelope.auth.bearer_token == SECRET


def test_a_user_token_is_not_in_the_call_options_repr() -> None:
    options = CallOptions(user_id="alice", auth_token=SECRET)
    assert SECRET not in repr(options) and "alice" in repr(options)
