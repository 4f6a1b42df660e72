"""Artifacts in object storage (S3, S3-compatible servers, GCS, Azure) through ``obstore``.

Install the ``artifacts-s3`` extra. Layout under the configured bucket and prefix::

    <namespace as one safe segment>/<context id, encoded>/<sha256 of the name>/<random>.bin   the bytes
    <namespace ...>/<context id ...>/<sha256 of the name>/v000000001.json                     version 1

A save uploads the bytes first (one multipart upload for a large one, which S3 completes
only at the end: a refused or failed save aborts it and leaves no object), then claims the
next version by writing its metadata with "create if absent", so two machines saving the same
name at once get different versions. The namespace's byte bound is checked when a save starts
and as its bytes arrive; saves racing on several machines can pass it by what they carry.
"""

from __future__ import annotations

import asyncio
import builtins
import hashlib
import json
import time
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterable
from typing import Any

from mesh.artifacts.errors import ArtifactNotFound, ArtifactStoreUnavailable
from mesh.artifacts.store import (
    CHUNK_BYTES,
    ArtifactInfo,
    ArtifactLimits,
    Meter,
    Source,
    guess_mime_type,
    purge_due,
    retention_horizon,
    source_chunks,
)
from mesh.artifacts.uris import ArtifactRef, encode_segment

__all__ = ["ObjectStore", "open_object_store"]

_VERSION_CLAIMS = 20  # a name saved this many times at once on several machines is not plausible
_CACHE = 1024


def open_object_store(url: str, options: dict[str, Any], client_options: dict[str, Any]) -> Any:
    """An ``obstore`` store for ``url`` (``s3://bucket/prefix``, ``gs://...``, ``az://...``)."""
    try:
        from obstore.store import from_url
    except ImportError as exc:
        raise ArtifactStoreUnavailable(
            f"artifact store {url!r} needs obstore: pip install 'mqtt-agent-mesh[artifacts-s3]'"
        ) from exc
    try:
        return from_url(url, config=options or None, client_options=client_options or None)  # type: ignore[arg-type]
    except BaseException as exc:  # obstore panics (a BaseException) on some bad options
        if isinstance(exc, KeyboardInterrupt | SystemExit | asyncio.CancelledError):
            raise
        raise ArtifactStoreUnavailable(
            f"cannot open artifact store {url!r}: {exc}; check artifacts.options (endpoint, region, "
            "credentials) and artifacts.client_options (allow_http, timeout)"
        ) from None


class ObjectStore:
    """The artifacts of ``namespace`` in an ``obstore`` store (see the module docstring)."""

    def __init__(self, store: Any, namespace: str, limits: ArtifactLimits | None = None) -> None:
        import obstore

        self._obs = obstore
        self._store = store
        self.namespace = namespace
        self.limits = limits or ArtifactLimits()
        self._root = encode_segment(namespace)
        self._objects: OrderedDict[tuple[str, str, int], str] = OrderedDict()
        self._purged_at = 0.0
        # obstore raises the builtin FileNotFoundError for a missing object (its own NotFoundError
        # in some versions): either is "not found", every other failure "unavailable".
        self._not_found: tuple[type[BaseException], ...] = (FileNotFoundError, obstore.exceptions.NotFoundError)

    def _folder(self, context_id: str, name: str) -> str:
        return f"{self._root}/{encode_segment(context_id)}/{hashlib.sha256(name.encode()).hexdigest()}"

    async def _call(self, operation: Any) -> Any:
        try:
            return await operation
        except self._not_found:
            raise
        except (self._obs.exceptions.AlreadyExistsError, FileExistsError):
            raise
        except (self._obs.exceptions.BaseError, OSError) as exc:
            raise ArtifactStoreUnavailable(f"the artifact store failed: {exc}") from exc

    # ---------------------------------------------------------------- writing

    async def save(
        self,
        context_id: str,
        name: str,
        source: Source,
        *,
        mime_type: str | None = None,
        owner_task: str | None = None,
        owner_user: str | None = None,
    ) -> ArtifactInfo:
        ref = ArtifactRef(context_id, name)
        if purge_due(self._purged_at):
            await self.purge()
        meter = Meter(self.limits, await self.usage(), self.namespace)
        folder = self._folder(ref.context_id, ref.name)
        data_key = f"{folder}/{uuid.uuid4().hex}.bin"

        async def metered() -> AsyncIterator[bytes | memoryview]:
            async for chunk in source_chunks(source, 8 * CHUNK_BYTES):
                meter.add(chunk)  # raising here aborts the multipart upload: no object is left
                yield chunk

        if isinstance(source, bytes | bytearray | memoryview):
            meter.check(len(source))
        await self._call(self._obs.put_async(self._store, data_key, metered()))
        try:
            info = ArtifactInfo(
                context_id=ref.context_id,
                name=ref.name,
                version=await self._latest_version(folder) + 1,
                mime_type=guess_mime_type(name, mime_type),
                size=meter.size,
                sha256=meter.digest.hexdigest(),
                created=time.time(),
                owner_task=owner_task,
                owner_user=owner_user,
            )
            for _ in range(_VERSION_CLAIMS):
                document = json.dumps({**info.to_dict(), "object": data_key}).encode()
                try:
                    await self._call(
                        self._obs.put_async(self._store, _meta_key(folder, info.version), document, mode="create")
                    )
                except (self._obs.exceptions.AlreadyExistsError, FileExistsError):
                    info = ArtifactInfo(**{**_as_fields(info), "version": info.version + 1})
                    continue
                self._remember(info, data_key)
                return info
            raise ArtifactStoreUnavailable(f"could not claim a version of {ref.uri}: too many concurrent saves")
        except BaseException:
            await self._obs.delete_async(self._store, data_key)
            raise

    async def _latest_version(self, folder: str) -> int:
        versions = [_version_of(item["path"]) for item in await self._listing(f"{folder}/")]
        return max((v for v in versions if v is not None), default=0)

    async def _listing(self, prefix: str) -> builtins.list[Any]:
        stream = self._obs.list(self._store, prefix=prefix)
        return list(await self._call(stream.collect_async()))

    def _remember(self, info: ArtifactInfo, data_key: str) -> None:
        key = (info.context_id, info.name, info.version)
        self._objects[key] = data_key
        self._objects.move_to_end(key)
        while len(self._objects) > _CACHE:
            self._objects.popitem(last=False)

    # ---------------------------------------------------------------- reading

    async def _meta(self, key: str) -> dict[str, Any]:
        result = await self._call(self._obs.get_async(self._store, key))
        data: dict[str, Any] = json.loads(bytes(await result.bytes_async()))
        return data

    async def info(self, ref: ArtifactRef) -> ArtifactInfo:
        folder = self._folder(ref.context_id, ref.name)
        version = ref.version if ref.version is not None else await self._latest_version(folder)
        try:
            if not version:
                raise FileNotFoundError(ref.uri)
            data = await self._meta(_meta_key(folder, version))
        except self._not_found:
            raise ArtifactNotFound(f"no artifact {ref.uri} in namespace {self.namespace!r}") from None
        info = ArtifactInfo.from_dict(data)
        self._remember(info, str(data["object"]))
        return info

    async def open(self, info: ArtifactInfo, start: int = 0, end: int | None = None) -> AsyncIterator[bytes]:
        end = info.size if end is None else min(end, info.size)
        if start >= end:
            return
        key = self._objects.get((info.context_id, info.name, info.version))
        if key is None:
            key = str((await self._meta(_meta_key(self._folder(info.context_id, info.name), info.version)))["object"])
        try:
            result = await self._call(self._obs.get_async(self._store, key, options={"range": (start, end)}))
        except self._not_found:
            raise ArtifactNotFound(f"artifact {info.uri} was deleted") from None
        async for chunk in result.stream(min_chunk_size=CHUNK_BYTES):
            yield bytes(chunk)

    async def list(self, context_id: str | None = None) -> builtins.list[ArtifactInfo]:
        prefix = f"{self._root}/" if context_id is None else f"{self._root}/{encode_segment(context_id)}/"
        keys = [item["path"] for item in await self._listing(prefix) if _version_of(item["path"]) is not None]
        limit = asyncio.Semaphore(16)

        async def read(key: str) -> ArtifactInfo | None:
            async with limit:
                try:
                    return ArtifactInfo.from_dict(await self._meta(key))
                except self._not_found:
                    return None  # deleted while listing

        found = [info for info in await asyncio.gather(*(read(k) for k in keys)) if info is not None]
        return sorted(found, key=lambda i: (i.context_id, i.name, i.version))

    async def usage(self) -> int:
        return sum(int(item["size"]) for item in await self._listing(f"{self._root}/") if item["path"].endswith(".bin"))

    # ---------------------------------------------------------------- deleting

    async def delete(self, ref: ArtifactRef) -> int:
        folder = self._folder(ref.context_id, ref.name)
        keys = [item["path"] for item in await self._listing(f"{folder}/")]
        if ref.version is not None:
            keys = [k for k in keys if _version_of(k) == ref.version]
        return await self._delete_versions(keys)

    async def purge(self, older_than: float | None = None) -> int:
        horizon = retention_horizon(self.limits) if older_than is None else older_than
        self._purged_at = time.monotonic()
        keys = [
            item["path"]
            for item in await self._listing(f"{self._root}/")
            if _version_of(item["path"]) is not None and item["last_modified"].timestamp() < horizon
        ]
        return await self._delete_versions(keys)

    async def delete_owned(self, owners: Iterable[tuple[str, str]]) -> int:
        tasks_of: dict[str, set[str]] = {}
        for context_id, task_id in owners:
            tasks_of.setdefault(context_id, set()).add(task_id)
        limit = asyncio.Semaphore(16)

        async def owned(key: str, tasks: set[str]) -> bool:
            async with limit:
                try:
                    return (await self._meta(key)).get("ownerTask") in tasks
                except self._not_found:
                    return False  # deleted meanwhile

        deleted = 0
        for context_id, tasks in tasks_of.items():  # one listing per context: most have no artifacts
            prefix = f"{self._root}/{encode_segment(context_id)}/"
            keys = [item["path"] for item in await self._listing(prefix) if _version_of(item["path"]) is not None]
            marks = await asyncio.gather(*(owned(key, tasks) for key in keys))
            deleted += await self._delete_versions([key for key, mine in zip(keys, marks, strict=True) if mine])
        return deleted

    async def _delete_versions(self, meta_keys: builtins.list[str]) -> int:
        deleted = 0
        for key in meta_keys:
            if _version_of(key) is None:
                continue
            try:
                data_key = str((await self._meta(key))["object"])
            except self._not_found:
                continue
            await self._call(self._obs.delete_async(self._store, key))  # first: no reader finds it
            await self._call(self._obs.delete_async(self._store, data_key))
            deleted += 1
        return deleted

    async def close(self) -> None:
        self._objects.clear()


def _meta_key(folder: str, version: int) -> str:
    return f"{folder}/v{version:09d}.json"


def _version_of(key: str) -> int | None:
    tail = key.rpartition("/")[2]
    if tail.startswith("v") and tail.endswith(".json") and tail[1:-5].isdigit():
        return int(tail[1:-5])
    return None


def _as_fields(info: ArtifactInfo) -> dict[str, Any]:
    return {name: getattr(info, name) for name in ArtifactInfo.__dataclass_fields__}
