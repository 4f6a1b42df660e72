"""The usage store's contract on both engines (SQLite, PostgreSQL), which one an agent opens,
``mesh usage --store``, and a PostgreSQL store out of reach."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from mesh.cli import main
from mesh.store import parse_store_url
from mesh.store.checks import store_findings
from mesh.telemetry.pgusage import PgUsageStore
from mesh.telemetry.usage import (
    COMMIT_DELAY_S,
    Counter,
    SqliteUsageStore,
    UsageRow,
    UsageStore,
    open_usage_store,
    window_of,
)
from tests.support import within
from tests.whole_product_clients import eventually

Replica = Callable[[], UsageStore]


def row(at: float, *, user: str = "alice", tokens: tuple[int, int] = (60, 40), cost: float | None = None) -> UsageRow:
    return UsageRow(
        at=at, agent="assistant", user=user, model="test", requests=1, input_tokens=tokens[0],
        output_tokens=tokens[1], cache_read_tokens=7, cost_usd=cost,
    )  # fmt: skip


@pytest.fixture(params=["sqlite", "postgres"])
def replicas(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Replica]:
    """Opens another store on one record: another replica (SQLite: on this host; PostgreSQL: anywhere)."""
    opened: list[UsageStore] = []
    namespace = f"u{uuid.uuid4().hex[:10]}"  # the PostgreSQL record is the session's: a namespace of our own

    def open_one() -> UsageStore:
        if request.param == "sqlite":
            store: UsageStore = SqliteUsageStore(tmp_path / "llm-usage.sqlite3")
        else:
            url = request.getfixturevalue("postgres_url")
            store = PgUsageStore(parse_store_url(url), namespace, fresh_s=0.0)  # every check reads again
        opened.append(store)
        return store

    yield open_one
    for store in opened:
        store.close()


def test_spent_is_the_window_of_now_and_counts_what_was_added(replicas: Replica) -> None:
    store = replicas()
    counter, other = Counter("user", "alice", 3600), Counter("agent", "assistant", 86400)
    now = time.time()
    store.add(row(now - 3600), (counter, other))  # last hour's window
    store.add(row(now), (counter, other))
    store.add(row(now, tokens=(5, 5)), (counter,))
    assert store.spent(counter, now) == 110 and store.spent(counter, now - 3600) == 100
    assert store.spent(Counter("user", "bob", 3600), now) == 0
    assert store.flush() and store.spent(counter, now) == 110  # written: the same totals
    assert window_of(3600, now) <= now < window_of(3600, now) + 3600


def test_rows_since_are_oldest_first_with_their_tokens_and_cost(replicas: Replica) -> None:
    store = replicas()
    now = time.time()
    store.add(row(now - 7200, user="old"))
    store.add(row(now - 10, user="bob", cost=0.0015))
    store.add(row(now - 20, user="alice"))
    rows = store.rows(now - 3600)
    assert [(r.user, r.tokens, r.cache_read_tokens, r.cost_usd) for r in rows] == [
        ("alice", 100, 7, None),
        ("bob", 100, 7, 0.0015),
    ]
    assert rows[0].at == pytest.approx(now - 20) and rows[0].agent == "assistant" and rows[0].model == "test"


async def test_two_replicas_count_into_one_counter(replicas: Replica) -> None:
    one, two = replicas(), replicas()
    counter = Counter("user", "alice", 86400)
    now = time.time()
    assert two.spent(counter, now) == 0  # read (and, on PostgreSQL, cached) before the other spends
    one.add(row(now), (counter,))
    assert one.flush()
    two.add(row(now, tokens=(1, 2)), (counter,))

    async def both_see_it() -> tuple[bool, str]:
        seen = (one.spent(counter, now), two.spent(counter, now))
        return seen == (103, 103), f"the replicas' totals: {seen}"

    await eventually(both_see_it, timeout=10, what="each replica sees what the other spent", every=0.02)


def test_the_agents_task_store_or_mesh_store_chooses_postgresql_and_usage_store_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pg, file = "postgresql://mesh@db.invalid:5432/mesh", str(tmp_path / "own.sqlite3")
    monkeypatch.setenv("MESH_STATE_DIR", str(tmp_path / "state"))
    cases = [
        ({"setting": pg}, PgUsageStore),
        ({"task_store": pg}, PgUsageStore),
        ({"environ": {"MESH_STORE": pg}}, PgUsageStore),
        ({"setting": file, "task_store": pg, "environ": {"MESH_STORE": pg}}, SqliteUsageStore),
        ({"environ": {}}, SqliteUsageStore),
    ]
    for options, kind in cases:
        store = open_usage_store("ns", **options)  # type: ignore[arg-type]
        try:
            assert isinstance(store, kind), (options, store)
        finally:
            store.close()  # nothing was read: no connection was tried


def test_mesh_usage_store_reads_what_replicas_on_other_hosts_recorded(
    postgres_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    namespace = f"u{uuid.uuid4().hex[:10]}"
    now = time.time()
    for user in ("alice", "bob"):  # two replicas, each with its own store
        store = PgUsageStore(parse_store_url(postgres_url), namespace)
        store.add(row(now - 5, user=user, cost=0.002), (Counter("user", user, 86400),))
        store.close()
    assert main(["usage", "--store", postgres_url, "--namespace", namespace, "--by", "user"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["USER", "REQUESTS", "INPUT", "OUTPUT", "CACHE", "READ", "COST", "USD"]
    assert [line.split() for line in lines[1:]] == [
        ["alice", "1", "60", "40", "7", "0.002000"],
        ["bob", "1", "60", "40", "7", "0.002000"],
    ]
    monkeypatch.setenv("MESH_STORE", postgres_url)  # the default of --store
    assert main(["usage", "--namespace", namespace, "--by", "agent", "--json"]) == 0
    [line] = json.loads(capsys.readouterr().out)
    assert line["agent"] == "assistant" and line["requests"] == 2 and line["cost_usd"] == pytest.approx(0.004)
    schema = [f for f in store_findings(postgres_url) if f.check == "store schema"]
    assert schema and "llm_usage v1" in schema[0].seen, schema  # mesh doctor --store lists it


def test_mesh_usage_says_what_to_check_when_the_store_is_out_of_reach(capsys: pytest.CaptureFixture[str]) -> None:
    url = f"postgresql://mesh:hunter2@127.0.0.1:{_closed_port()}/mesh"
    assert main(["usage", "--store", url]) == 2
    err = capsys.readouterr().err
    assert "cannot read the usage store" in err and "mesh doctor --store" in err and "hunter2" not in err, err


async def test_an_unreachable_store_counts_locally_warns_once_and_counts_what_it_lost(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = PgUsageStore(parse_store_url(f"postgresql://mesh@127.0.0.1:{_closed_port()}/mesh"), "ns")
    counter = Counter("user", "alice", 86400)
    now = time.time()
    with caplog.at_level(logging.WARNING, logger="mesh.telemetry.pgusage"):
        waiting = store.prefetch((counter,), now)
        assert waiting is not None
        await asyncio.wait_for(asyncio.wrap_future(waiting), 15)  # answered, though nothing could be read
        for _ in range(3):
            store.add(row(now), (counter,))
        assert store.spent(counter, now) == 300  # this process's own spending still counts
        assert not store.flush(timeout=0.2)
        await asyncio.to_thread(store.close)
    warnings = [r for r in caplog.records if "unreachable" in r.getMessage()]
    assert len(warnings) == 1 and "tasks go on" in warnings[0].getMessage(), caplog.text
    assert store.lost == 3 and "3 usage row(s) not written" in caplog.text, caplog.text


def _closed_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Forwarder:
    """A TCP hop to the database that can be cut and restored: an outage of the network, not of the server."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.port = _closed_port()
        self._server: asyncio.Server | None = None
        self._open: set[asyncio.StreamWriter] = set()

    async def up(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)

    async def down(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in list(self._open):
            writer.transport.abort()
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream_reader, upstream = await asyncio.open_connection(*self.target)
        self._open |= {writer, upstream}

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            try:
                while data := await source.read(65536):
                    sink.write(data)
                    await sink.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                sink.transport.abort()
                self._open.discard(sink)

        await asyncio.gather(pipe(reader, upstream), pipe(upstream_reader, writer))


async def test_rows_that_waited_through_an_outage_are_written_once_the_store_is_back(
    postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    from urllib.parse import urlsplit

    target = urlsplit(postgres_url)
    hop = Forwarder(target.hostname or "127.0.0.1", target.port or 5432)
    await hop.up()
    url = postgres_url.replace(f"{target.hostname}:{target.port}", f"127.0.0.1:{hop.port}", 1)
    store = PgUsageStore(parse_store_url(url), f"u{uuid.uuid4().hex[:10]}")
    counter = Counter("agent", "assistant", 86400)
    now = time.time()
    try:
        with caplog.at_level(logging.WARNING, logger="mesh.telemetry.pgusage"):
            store.add(row(now - 3), (counter,))
            assert await asyncio.to_thread(store.flush) and store.spent(counter, now) == 100
            await hop.down()
            store.add(row(now - 2), (counter,))
            store.add(row(now - 1), (counter,))
            assert not await asyncio.to_thread(store.flush, 0.5)  # out of reach: they wait
            assert store.spent(counter, now) == 300
            await hop.up()
            assert await asyncio.to_thread(store.flush, 60.0)  # written at the next retry
        assert "unreachable" in caplog.text and "reachable again" in caplog.text, caplog.text
        written = await asyncio.to_thread(store.rows, now - 60)
        assert [r.at for r in written] == pytest.approx([now - 3, now - 2, now - 1])  # each once
        assert store.spent(counter, now) == 300 and store.lost == 0
    finally:
        await asyncio.to_thread(store.close)
        await hop.down()


async def test_on_a_loop_rows_are_committed_together_and_counted_meanwhile(tmp_path: Path) -> None:
    writer, reader = SqliteUsageStore(tmp_path / "u.sqlite3"), SqliteUsageStore(tmp_path / "u.sqlite3")
    counter = Counter("user", "alice", 3600)
    now = time.time()
    try:
        for _ in range(3):
            writer.add(row(now), (counter,))
        # Queued, not committed: this process counts them, another sees them after the commit.
        assert writer.spent(counter, now) == 300 and reader.spent(counter, now) == 0

        async def committed() -> tuple[bool, str]:
            return reader.spent(counter, now) == 300, f"the other store's total: {reader.spent(counter, now)}"

        await eventually(committed, timeout=within(COMMIT_DELAY_S + 1), what="the rows committed", every=0.01)
        assert len(reader.rows(0)) == 3 and writer.spent(counter, now) == 300  # once, not twice
    finally:
        writer.close()
        reader.close()


def test_rows_queued_on_a_loop_that_ended_are_written_by_the_next_add_or_close(tmp_path: Path) -> None:
    path = tmp_path / "u.sqlite3"
    store = SqliteUsageStore(path)

    async def add_one() -> None:
        store.add(row(time.time()))

    def users() -> list[str]:  # as another process reads the file
        reader = SqliteUsageStore(path)
        try:
            return [r.user for r in reader.rows(0)]
        finally:
            reader.close()

    asyncio.run(add_one())  # its loop ends before the commit is due
    store.add(row(time.time(), user="bob"))  # off a loop: written at once, with what waited
    assert users() == ["alice", "bob"]
    asyncio.run(add_one())
    store.close()  # writes what waits
    assert len(users()) == 3
