"""One middleware of each kind at the HTTP edge: the checks live once (in the layers the app
uses), and the entry layer reads the authentication backend through its public API only."""

from __future__ import annotations

import inspect

import gateways.http.edge as edge


def test_no_dead_copy_of_a_check_is_exported() -> None:
    for dead in ("OptionalTrailingSlash", "JsonBody", "RequestSlots", "BodyLimit"):
        assert not hasattr(edge, dead), f"{dead} duplicates a check EdgeEntry/PrivateRoute makes"
        assert dead not in edge.__all__


def test_the_entry_layer_reads_no_private_field_of_the_backend() -> None:
    source = inspect.getsource(edge.EdgeEntry)
    assert "backend._" not in source and ".backend._" not in source
