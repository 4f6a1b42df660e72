"""Thin clients for the whole-product test (tests/test_whole_product.py): the ``mesh`` console script
run as a user runs it, and the HTTP pieces a browser or a script uses (sign-in, SSE).

Nothing here starts a broker or sets a broker URL: every command finds ``mesh up`` through the
state directory of the ``HOME`` it is given.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.mesh.cli_process import Result, Service

BIN = Path(sys.executable).parent  # the venv the tests run in
MESH = BIN / "mesh"  # its console script, as the README runs it
#: What the child environment must not carry: the commands find everything through $HOME's state dir.
DROPPED = ("XDG_STATE_HOME",)
TASK_LINE = re.compile(r"^task ([0-9a-f]{32})$", re.M)
INPUT_REQUIRED = re.compile(r"\(task ([0-9a-f]{32}) is input-required: answer with --task \1\)")
CSRF_META = re.compile(r'<meta name="csrf-token" content="([^"]*)"')
FORM_CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def user_env(home: Path, **extra: str) -> dict[str, str]:
    """This process's environment as a new user's shell has it: ``HOME`` fresh, no ``MESH_*``
    variable (conftest's MESH_STATE_DIR among them), no XDG state directory."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MESH_") and k not in DROPPED}
    env.update(
        HOME=str(home),
        PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        PYTHONUNBUFFERED="1",  # stdout and stderr interleave as on a terminal
    )
    env.update(extra)
    return env


def shown(what: str, result: Result) -> str:
    """An assertion message: the step, then what the command printed."""
    return f"{what}: exit {result.code}\n--- stdout ---\n{result.stdout}\n--- stderr ---\n{result.stderr}"


async def run(
    argv: list[str], *, env: dict[str, str], cwd: Path, timeout: float = 60.0, merged: bool = False
) -> Result:
    """Run ``argv`` to completion (``merged``: stderr into stdout, as a terminal shows them)."""
    proc = await asyncio.create_subprocess_exec(
        *argv,
        cwd=cwd,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT if merged else asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        proc.kill()
        out, err = await proc.communicate()
        return Result(-9, out.decode(), f"{(err or b'').decode()}\n(killed: still running after {timeout:g} s)")
    assert proc.returncode is not None
    return Result(proc.returncode, out.decode(), (err or b"").decode())


async def stop(service: Service, timeout: float = 30.0) -> int:
    """Ctrl-C (SIGINT); killed if it has not ended within ``timeout`` (then -9)."""
    try:
        return await service.stop(signal.SIGINT, timeout)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            service.proc.kill()
        await service.proc.wait()
        await asyncio.gather(*service._readers)
        return -9


async def eventually(
    check: Callable[[], Awaitable[tuple[bool, str]]], *, timeout: float, what: str, every: float = 0.25
) -> str:
    """Call ``check`` until it says yes (its detail is returned) or ``timeout`` has passed
    (AssertionError with ``what`` and the last detail). For what another process offers no event for."""
    detail = "not checked"
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        ok, detail = await check()
        if ok:
            return detail
        if loop.time() >= deadline:
            raise AssertionError(f"{what} (within {timeout:g} s); last seen:\n{detail}")
        await asyncio.sleep(every)


def task_id_of(result: Result) -> str:
    """The task id a plain ``mesh send`` prints first, on stderr."""
    found = TASK_LINE.search(result.stderr)
    assert found, shown("mesh send printed no task id", result)
    return found[1]


# ---------------------------------------------------------------- HTTP as a browser does it


@contextlib.asynccontextmanager
async def signed_in(base: str, key: str | None, *, next_path: str = "/chat") -> AsyncIterator[httpx.AsyncClient]:
    """A browser (its own cookie jar) signed in at ``/signin`` with the API key, as docs/chat.md
    says; the page's CSRF token is in its headers, as the pages send it. With authentication off
    (``mesh up --insecure``) there is nobody to sign in and the client is anonymous."""
    async with httpx.AsyncClient(base_url=base, timeout=30) as browser:
        form = await browser.get("/signin", params={"next": next_path})
        if form.status_code == 200:
            token = FORM_CSRF.search(form.text)
            assert token and key, f"sign-in form without a CSRF token, or no API key to type in:\n{form.text}"
            answer = await browser.post("/signin", data={"csrf": token[1], "next": next_path, "key": key})
            assert answer.status_code == 303, f"POST /signin with the API key: {answer.status_code}\n{answer.text}"
        else:
            assert form.status_code == 303, f"GET /signin: {form.status_code}\n{form.text}"
        page = await browser.get(next_path)
        assert page.status_code == 200, f"GET {next_path} signed in: {page.status_code}\n{page.text[:2000]}"
        csrf = CSRF_META.search(page.text)
        if csrf and csrf[1]:
            browser.headers["X-CSRF-Token"] = csrf[1]
        yield browser


async def sse_events(response: httpx.Response) -> AsyncIterator[tuple[str, Any]]:
    """The (event, data) pairs of an SSE response, as they come."""
    kind, data = "message", []
    async for line in response.aiter_lines():
        if line.startswith("event:"):
            kind = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].strip())
        elif not line and data:
            yield kind, json.loads("\n".join(data))
            kind, data = "message", []


async def sse_post(client: httpx.AsyncClient, path: str, body: dict[str, Any]) -> tuple[int, list[tuple[str, Any]]]:
    """POST ``body``; the status and every SSE event of the answer (an error body as one ``refused``)."""
    async with client.stream("POST", path, json=body) as response:
        if response.status_code != 200:
            return response.status_code, [("refused", (await response.aread()).decode())]
        return 200, [event async for event in sse_events(response)]


@dataclass
class Feed:
    """A followed SSE stream (the dashboard's ``/ui/api/events``): every event kept, waiters woken."""

    events: list[tuple[str, Any]] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    ended: str | None = None

    async def follow(self, response: httpx.Response) -> None:
        try:
            async for event in sse_events(response):
                self.events.append(event)
                self.changed.set()
        except (httpx.HTTPError, asyncio.CancelledError) as exc:
            self.ended = repr(exc)
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            self.ended = self.ended or "the stream ended"
            self.changed.set()

    async def wait_for(self, found: Callable[[], Any], *, timeout: float, what: str) -> Any:
        try:
            async with asyncio.timeout(timeout):
                while True:
                    self.changed.clear()
                    if value := found():
                        return value
                    if self.ended is not None:
                        break
                    await self.changed.wait()
        except TimeoutError:
            pass
        kinds = [kind for kind, _ in self.events]
        raise AssertionError(f"{what} (within {timeout:g} s; {self.ended or 'still open'}); events: {kinds}")
