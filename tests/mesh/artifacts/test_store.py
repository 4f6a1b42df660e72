"""The artifact store contract, run against the embedded store and a real S3-compatible server."""

from __future__ import annotations

import hashlib
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from mesh.artifacts import (
    ArtifactLimits,
    ArtifactNotFound,
    ArtifactRef,
    ArtifactStore,
    ArtifactStoreFull,
    ArtifactTooLarge,
    InvalidArtifactName,
    open_store,
    read_all,
)
from tests.artifact_stores import store_settings


async def _chunks(data: bytes, size: int) -> AsyncIterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]


def _open(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest, limits: ArtifactLimits | None = None
) -> ArtifactStore:
    return open_store(store_settings(kind, tmp_path, request, limits), "acme/ai")


async def test_save_from_bytes_path_and_iterator_round_trip(
    store_kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    store = _open(store_kind, tmp_path, request)
    data = os.urandom(3 * 1024 * 1024 + 17)
    source = tmp_path / "source.bin"
    source.write_bytes(data)
    from_bytes = await store.save("ctx-1", "a.bin", data, owner_user="alice", owner_task="t1")
    from_path = await store.save("ctx-1", "b.bin", source)
    from_iter = await store.save("ctx-1", "c/d.txt", _chunks(data, 65536), mime_type="text/plain")
    digest = hashlib.sha256(data).hexdigest()
    for info in (from_bytes, from_path, from_iter):
        assert (info.size, info.sha256, info.version) == (len(data), digest, 1)
        assert await read_all(store, info.ref) == data
    assert from_bytes.owner_user == "alice" and from_bytes.owner_task == "t1"
    assert from_iter.mime_type == "text/plain" and from_bytes.mime_type == "application/octet-stream"
    assert from_iter.uri == "artifact://ctx-1/c/d.txt?version=1"
    assert (await store.info(ArtifactRef.parse(from_iter.uri))).sha256 == digest
    await store.close()


async def test_versions_latest_and_listing(store_kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    store = _open(store_kind, tmp_path, request)
    for text in (b"one", b"two", b"three"):
        await store.save("ctx", "notes.md", text)
    await store.save("other", "notes.md", b"elsewhere")
    assert (await store.info(ArtifactRef("ctx", "notes.md"))).version == 3
    assert await read_all(store, ArtifactRef("ctx", "notes.md", 2)) == b"two"
    assert await read_all(store, ArtifactRef("ctx", "notes.md")) == b"three"
    assert [(i.name, i.version) for i in await store.list("ctx")] == [("notes.md", 1), ("notes.md", 2), ("notes.md", 3)]
    assert len(await store.list()) == 4
    assert await store.delete(ArtifactRef("ctx", "notes.md", 3)) == 1
    assert (await store.info(ArtifactRef("ctx", "notes.md"))).version == 2
    assert await store.delete(ArtifactRef("ctx", "notes.md")) == 2
    with pytest.raises(ArtifactNotFound, match=r"artifact://ctx/notes\.md"):
        await store.info(ArtifactRef("ctx", "notes.md"))
    assert await store.usage() == len(b"elsewhere")
    await store.close()


async def test_ranges(store_kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    store = _open(store_kind, tmp_path, request)
    data = os.urandom(2_500_000)
    info = await store.save("ctx", "r.bin", data)
    for start, end in ((0, 1), (5, 1_500_000), (2_499_999, None), (1_000_000, 10_000_000)):
        got = b"".join([c async for c in store.open(info, start, end)])
        assert got == data[start:end]
    await store.close()


async def test_too_large_and_full_store_leave_nothing(
    store_kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    limits = ArtifactLimits(max_artifact_bytes=6_000_000, max_namespace_bytes=10_000_000)
    store = _open(store_kind, tmp_path, request, limits)
    await store.save("ctx", "first.bin", os.urandom(3_000_000))
    with pytest.raises(ArtifactTooLarge, match="max_artifact_bytes"):
        await store.save("ctx", "big.bin", _chunks(os.urandom(7_000_000), 1 << 20))
    await store.save("ctx", "second.bin", os.urandom(5_000_000))
    with pytest.raises(ArtifactStoreFull, match=r"acme/ai.*full.*max_namespace_bytes"):
        await store.save("ctx", "third.bin", _chunks(os.urandom(5_000_000), 1 << 20))
    with pytest.raises(ArtifactStoreFull):
        await store.save("ctx", "fourth.bin", os.urandom(5_000_000))
    assert [i.name for i in await store.list()] == ["first.bin", "second.bin"]
    assert await store.usage() == 8_000_000  # no partial object, no orphaned bytes
    if store_kind != "s3":  # the embedded store, its catalog in SQLite or PostgreSQL
        root = tmp_path / "artifacts"
        files = [p for p in root.rglob("*") if p.is_file() and "catalog" not in p.name]
        assert len(files) == 2  # the stored artifacts only: no temporary file left
    await store.close()


async def test_retention_purges_old_versions(store_kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    store = _open(store_kind, tmp_path, request)
    info = await store.save("ctx", "old.txt", b"x")
    assert await store.purge(older_than=info.created - 60) == 0
    assert await store.purge(older_than=info.created + 60) == 1
    assert await store.list() == []
    await store.close()


@pytest.mark.parametrize(
    "name", ["..", "../etc/passwd", "a/../b", ".hidden", "a//b", "/abs", "a\\b", "x" * 256, "", "a b", "ümlaut", "a/"]
)
async def test_hostile_names_are_refused(name: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    store = _open("embedded", tmp_path, request)
    with pytest.raises(InvalidArtifactName):
        await store.save("ctx", name, b"x")
    assert not list((tmp_path / "artifacts").rglob("*.part"))
    await store.close()


async def test_namespaces_never_share_a_folder(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    settings = store_settings("embedded", tmp_path, request)
    one, two = open_store(settings, "acme/ai"), open_store(settings, "acme_ai")
    await one.save("ctx", "a.txt", b"one")
    await two.save("ctx", "a.txt", b"two")
    assert await read_all(one, ArtifactRef("ctx", "a.txt")) == b"one"
    assert await read_all(two, ArtifactRef("ctx", "a.txt")) == b"two"
    assert len({p.name for p in (tmp_path / "artifacts").iterdir()}) == 2
    await one.close()
    await two.close()


async def test_delete_owned_takes_only_the_versions_of_that_task_in_its_context(
    store_kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    store = _open(store_kind, tmp_path, request)
    assert await store.delete_owned([("ctx", "t1")]) == 0  # nothing saved yet: nothing to do
    await store.save("ctx", "a.txt", b"1", owner_task="t1")
    await store.save("ctx", "a.txt", b"2", owner_task="t2")  # version 2 of the same name, another task
    await store.save("ctx", "b.txt", b"3", owner_task="t1")
    await store.save("other", "a.txt", b"4", owner_task="t1")  # same task id, another context
    await store.save("ctx", "c.txt", b"5")  # no owner task
    assert await store.delete_owned([("ctx", "t1"), ("ctx", "t1"), ("ctx", "gone")]) == 2
    left = [(i.context_id, i.name, i.version, i.owner_task) for i in await store.list()]
    assert left == [("ctx", "a.txt", 2, "t2"), ("ctx", "c.txt", 1, None), ("other", "a.txt", 1, "t1")]
    assert await read_all(store, ArtifactRef("ctx", "a.txt")) == b"2"
    assert await store.usage() == 3
    await store.close()
