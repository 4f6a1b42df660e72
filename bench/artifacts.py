"""Artifacts: save and download 100 MB through the embedded store and the HTTP gateway.

Side by side with what a user would do without the mesh: a plain ``cp`` of the same file, and
a plain HTTP static download of it (Starlette's ``FileResponse`` on uvicorn). Everything runs
on loopback; both servers run in this process and are read by the same httpx client, so they
pay the same client costs. The goal: the mesh's download at least 0.5x the static one.

    python bench/artifacts.py [--size-mb 100] [--rounds 3]     # one JSON line last on stdout
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import Route

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.harness import base_arguments, broker_url, emit, progress, ratio
from gateways.http.server import HttpGateway
from gateways.http.settings import HttpGatewaySettings
from mesh.artifacts import ArtifactLimits, ArtifactSettings, open_store
from mesh.broker import BrokerSettings

MB = 1 << 20


def make_file(path: Path, size: int) -> None:
    with path.open("wb") as out:
        for _ in range(size // MB):
            out.write(os.urandom(MB))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def timed(rounds: int, run: Callable[[], Awaitable[None]]) -> float:
    """The median seconds of ``rounds`` runs."""
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        await run()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


async def download(client: httpx.AsyncClient, url: str, size: int) -> None:
    got = 0
    async with client.stream("GET", url) as response:
        response.raise_for_status()
        async for chunk in response.aiter_raw():
            got += len(chunk)
    if got != size:
        raise RuntimeError(f"{url}: {got} bytes downloaded, {size} expected")


async def static_server(path: Path) -> tuple[uvicorn.Server, asyncio.Task[None], str]:
    async def serve(request: Request) -> Response:
        return FileResponse(path, media_type="application/octet-stream", filename=path.name)

    port = free_port()
    config = uvicorn.Config(Starlette(routes=[Route("/file", serve)]), port=port, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    task = asyncio.get_running_loop().create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
    return server, task, f"http://127.0.0.1:{port}/file"


async def run(url: str, size_mb: int, rounds: int, work: Path) -> dict[str, object]:
    size = size_mb * MB
    source = work / "source.bin"
    progress(f"writing a {size_mb} MB file")
    make_file(source, size)

    def cp() -> None:
        subprocess.run(["cp", str(source), str(work / "copy.bin")], check=True)

    cp_s = await timed(rounds, lambda: asyncio.to_thread(cp))
    progress(f"cp: {size_mb / cp_s:.0f} MB/s")

    server, serving, static_url = await static_server(source)
    async with httpx.AsyncClient(timeout=120) as client:
        static_s = await timed(rounds, lambda: download(client, static_url, size))
    server.should_exit = True
    await serving
    progress(f"static FileResponse download: {size_mb / static_s:.0f} MB/s")

    namespace = f"bench/{uuid.uuid4().hex[:8]}"
    settings = ArtifactSettings(path=str(work / "artifacts"), limits=ArtifactLimits(max_namespace_bytes=50 * size))
    store = open_store(settings, namespace)
    infos = []

    async def save() -> None:
        infos.append(await store.save("bench", "big.bin", source, owner_user="anonymous"))

    save_s = await timed(rounds, save)
    progress(f"mesh save (embedded store, from a path): {size_mb / save_s:.0f} MB/s")

    gateway = HttpGateway(
        HttpGatewaySettings.model_validate({"port": 0}),
        broker=BrokerSettings.from_url(url),
        namespace=namespace,
        artifacts=settings,
    )
    await gateway.start()
    try:
        link = gateway.artifacts.link(gateway.public_url, infos[-1].uri, "anonymous")
        assert link is not None
        async with httpx.AsyncClient(timeout=120) as client:
            mesh_s = await timed(rounds, lambda: download(client, link, size))
    finally:
        await gateway.stop()
        await store.close()
    progress(f"mesh download (gateway, signed link): {size_mb / mesh_s:.0f} MB/s")
    return {
        "bench": "artifacts",
        "size_mb": size_mb,
        "rounds": rounds,
        "cp_mb_s": round(size_mb / cp_s, 1),
        "static_download_mb_s": round(size_mb / static_s, 1),
        "mesh_save_mb_s": round(size_mb / save_s, 1),
        "mesh_download_mb_s": round(size_mb / mesh_s, 1),
        "mesh_save_plus_download_mb_s": round(size_mb / (save_s + mesh_s), 1),
        "cp_plus_static_mb_s": round(size_mb / (cp_s + static_s), 1),
        "download_vs_static": ratio(static_s, mesh_s),
        "save_vs_cp": ratio(cp_s, save_s),
        "goal": "download_vs_static >= 0.5",
    }


def main() -> None:
    parser = base_arguments(__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=100, help="the artifact's size")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each step (the median counts)")
    args = parser.parse_args()
    with broker_url(args.broker) as url, tempfile.TemporaryDirectory(prefix="mesh-bench-artifacts-") as work:
        result = asyncio.run(run(url, args.size_mb, args.rounds, Path(work)))
    shutil.rmtree(work, ignore_errors=True)
    emit(result)


if __name__ == "__main__":
    main()
