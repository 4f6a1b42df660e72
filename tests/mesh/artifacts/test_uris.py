"""artifact:// URIs, names, the namespace encoding and the artifacts: config."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mesh.artifacts import ArtifactRef, ArtifactSettings, InvalidArtifactUri, resolve_settings
from mesh.artifacts.parts import rewrite_artifact_uris
from mesh.artifacts.uris import encode_segment
from mesh.config import load_config
from mesh.errors import ConfigError


def test_uri_round_trip_and_the_seed_form() -> None:
    ref = ArtifactRef.parse("artifact://session-abc/report.pdf")
    assert (ref.context_id, ref.name, ref.version) == ("session-abc", "report.pdf", None)
    assert ref.uri == "artifact://session-abc/report.pdf"
    assert ArtifactRef.parse("artifact://c/charts/q3.png?version=2") == ArtifactRef("c", "charts/q3.png", 2)
    assert ArtifactRef("c", "a.txt", 7).uri == "artifact://c/a.txt?version=7"


@pytest.mark.parametrize(
    ("uri", "problem"),
    [
        ("https://example.com/x.pdf", "not an artifact URI"),
        ("file:///etc/passwd", "not an artifact URI"),
        ("artifact://ctx", "names no artifact"),
        ("artifact://ctx/", "names no artifact"),
        ("artifact://ctx/a/../b", "bad segment"),
        ("artifact://ctx/a?version=0", "positive"),
        ("artifact://ctx/a?version=x", "positive"),
        ("artifact://ctx/a?version=1&version=2", "only query parameter"),
        ("artifact://ctx/a?owner=me", "only query parameter"),
        ("artifact://../a", "cannot hold artifacts"),
    ],
)
def test_foreign_and_malformed_uris_are_clear_errors(uri: str, problem: str) -> None:
    with pytest.raises(InvalidArtifactUri, match=problem):
        ArtifactRef.parse(uri)


@given(st.text(min_size=1, max_size=40))
def test_namespace_encoding_is_one_safe_injective_segment(namespace: str) -> None:
    encoded = encode_segment(namespace)
    assert "/" not in encoded and "\\" not in encoded and encoded not in (".", "..") and not encoded.startswith(".")
    assert encode_segment(namespace + "_") != encoded


def test_encoding_keeps_acme_ai_apart() -> None:
    assert encode_segment("acme/ai") != encode_segment("acme_ai")
    assert encode_segment("..") == "_2E."


def test_rewrite_replaces_only_artifact_uris() -> None:
    body = {
        "artifacts": [
            {"parts": [{"kind": "file", "file": {"uri": "artifact://c/a.txt?version=1", "name": "a.txt"}}]},
            {"parts": [{"kind": "file", "file": {"uri": "https://elsewhere/x"}}]},
        ]
    }
    out = rewrite_artifact_uris(body, lambda uri: "https://gw/" + uri.rpartition("/")[2])
    first = out["artifacts"][0]["parts"][0]
    assert first["file"]["uri"] == "https://gw/a.txt?version=1"
    assert first["metadata"]["artifactUri"] == "artifact://c/a.txt?version=1"
    assert out["artifacts"][1] is body["artifacts"][1]  # untouched parts are not copied
    assert body["artifacts"][0]["parts"][0]["file"]["uri"].startswith("artifact://")


def test_settings_from_the_file_the_environment_and_the_default(tmp_path: Path) -> None:
    config = tmp_path / "mesh.yaml"
    config.write_text("artifacts:\n  path: store\n  limits: {max_artifact_bytes: 1000}\n")
    loaded = load_config(config)
    assert loaded.artifacts == ArtifactSettings(path=str(tmp_path / "store"), limits={"max_artifact_bytes": 1000})
    assert resolve_settings(None, environ={}) == ArtifactSettings()
    assert resolve_settings(None, environ={"MESH_ARTIFACTS": "s3://b/p"}).store == "s3://b/p"
    assert resolve_settings(None, environ={"MESH_ARTIFACTS": "/srv/a"}).path == "/srv/a"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("artifacts: [1]", "artifacts: expected a mapping"),
        ("artifacts: {stor: s3://b}", "unknown key 'stor'"),
        ("artifacts: {limits: {max_artifact_bytes: -1}}", "max_artifact_bytes"),
    ],
)
def test_bad_artifacts_config_names_the_key(tmp_path: Path, text: str, problem: str) -> None:
    config = tmp_path / "mesh.yaml"
    config.write_text(text + "\n")
    with pytest.raises(ConfigError, match=problem):
        load_config(config)
