"""The small helpers every package shares: quoting bad values, hiding secrets, timestamps."""

from __future__ import annotations

from datetime import datetime

import pytest

from mesh.errors import short_repr
from mesh.redaction import is_secret_key, redact_url
from mesh.timestamps import utc_iso, utc_now_iso


def test_short_repr_keeps_short_values_and_cuts_long_ones_keeping_the_closing_quote() -> None:
    assert short_repr("abc") == "'abc'"
    long = short_repr("x" * 500)
    assert len(long) == 60 and long.startswith("'xxx") and long.endswith("...'")
    assert short_repr(list(range(100)), 20) == "[0, 1, 2, 3, 4, ...]"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("mqtt://u:s3cret@host:1883", "mqtt://u:***@host:1883"),
        ("mqtts://host:8883", "mqtts://host:8883"),
        ("mqtt://user@host", "mqtt://user@host"),
    ],
)
def test_redact_url_hides_only_the_password(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_one_secret_key_rule() -> None:
    assert all(map(is_secret_key, ["password", "X-Auth-Token", "clientSecret", "api_key", "privateKey", "Cookie"]))
    assert not any(map(is_secret_key, ["max_tokens", "inputTokens", "tokenizer", "author", "users", "mode"]))


def test_utc_timestamps() -> None:
    assert utc_iso(0) == "1970-01-01T00:00:00+00:00"
    assert utc_iso(1.5, timespec="milliseconds") == "1970-01-01T00:00:01.500+00:00"
    assert datetime.fromisoformat(utc_now_iso()).utcoffset() is not None
