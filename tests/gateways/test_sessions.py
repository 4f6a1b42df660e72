"""The session store on its own: expiry, the bound, nothing secret kept or shown."""

from __future__ import annotations

import time

from gateways.http.auth import Principal
from gateways.http.sessions import SessionStore

ADA = Principal("ada", "basic")


def test_a_session_is_found_by_its_id_until_it_expires_or_is_dropped() -> None:
    store = SessionStore(ttl_s=60)
    session_id, session = store.create(ADA)
    assert store.get(session_id) is session and store.get("forged") is None and store.get(None) is None
    assert session_id not in repr(session) and session.csrf not in repr(session)
    assert all(session_id not in key for key in store._sessions)  # kept by its hash only
    session.expires = time.time() - 1
    assert store.get(session_id) is None and len(store) == 0  # expired: refused and forgotten
    other_id, _ = store.create(ADA)
    store.drop(other_id)
    assert store.get(other_id) is None


def test_the_oldest_session_goes_when_the_store_is_full() -> None:
    store = SessionStore(ttl_s=60, max_sessions=2)
    first, _ = store.create(ADA)
    second, _ = store.create(ADA)
    third, _ = store.create(ADA)
    assert store.get(first) is None and store.get(second) and store.get(third) and len(store) == 2
