"""Takeover on a shared PostgreSQL store: how long after a replica dies another has its tasks.

Two Blocker replicas (processes of their own) share ``--store``; tasks are sent until the
victim runs ``--tasks`` of them; it is killed (kill -9) and the clock runs until every one of
its tasks is failed in the store by the survivor (``takeover_s``, goal < 3 s) and until a caller
waiting on one of them is told (``caller_learned_s``, DESIGN: within 2 s). Rounds: medians.

Run: ``python bench/takeover.py --store postgresql://USER@HOST/DB [--broker URL]`` (the
password in ``$MESH_STORE_PASSWORD``). ``bench/agent.py --store`` runs it too. Last line on
stdout: ``{"takeover_s": ..., "caller_learned_s": ..., "rounds": ...}``.
"""

from __future__ import annotations

import asyncio
import os
import signal
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.harness import base_arguments, broker_url, emit, progress

ROUNDS = 3
_REPLICA = """
import asyncio, sys
from agents import AgentSettings
from agents.service import AgentService
from mesh.broker import BrokerSettings
from tests.agents.service_agents import Blocker
async def main(url, namespace, store):
    settings = AgentSettings(shared_subscription=True, store=store)
    service = AgentService(Blocker(), broker=BrokerSettings.from_url(url), namespace=namespace, settings=settings)
    await service.start()
    print("ready", service.instance, flush=True)
    await asyncio.Event().wait()
asyncio.run(main(*sys.argv[1:]))
"""


def _replica(url: str, namespace: str, store: str) -> tuple[subprocess.Popen[str], str]:
    root = str(Path(__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": root}
    proc = subprocess.Popen(
        [sys.executable, "-c", _REPLICA, url, namespace, store], stdout=subprocess.PIPE, text=True, env=env
    )
    assert proc.stdout is not None
    ready, instance = proc.stdout.readline().split()
    assert ready == "ready"
    return proc, instance


async def one_round(url: str, store: str, tasks: int) -> tuple[float, float]:
    from agents.pgjournal import PostgresJournal
    from agents.sharedtasks import SharedTasks
    from mesh.client import MeshClient
    from mesh.errors import AgentUnavailableError
    from mesh.store import parse_store_url

    namespace = f"bench/{uuid.uuid4().hex[:8]}"
    victim_proc, victim = _replica(url, namespace, store)
    survivor_proc, _survivor = _replica(url, namespace, store)
    journal = PostgresJournal(
        parse_store_url(store), namespace=namespace, agent_name="blocker", instance="bench", shared=True
    )
    view = SharedTasks(journal)
    try:
        async with MeshClient.connect(url, namespace) as client:
            await client.wait_for_agent("blocker", 10)
            mine: list[str] = []
            while len(mine) < tasks:
                task = await client.send("blocker", "work", blocking=False)
                if client.calls.owner_of("blocker", task.id) == victim:  # type: ignore[union-attr]
                    mine.append(task.id)  # type: ignore[union-attr]
            for task_id in mine:
                while await view.get(task_id) is None:
                    await asyncio.sleep(0.01)
            waiter = asyncio.ensure_future(_follow(client, mine[0], AgentUnavailableError))
            await asyncio.sleep(0.2)  # the follow-up is open (bench only: tests wait on events)
            killed = time.monotonic()
            victim_proc.send_signal(signal.SIGKILL)
            learned = await waiter - killed
            for task_id in mine:
                while (found := await view.get(task_id)) is None or not found.terminal:
                    await asyncio.sleep(0.01)
            return time.monotonic() - killed, learned
    finally:
        await journal.close()
        for proc in (victim_proc, survivor_proc):
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
            proc.wait()


async def _follow(client: object, task_id: str, gone: type[Exception]) -> float:
    try:
        async for _item in client.resubscribe("blocker", task_id):  # type: ignore[attr-defined]
            pass
    except gone:
        pass
    return time.monotonic()


def measure(url: str, store: str, tasks: int = 5, rounds: int = ROUNDS) -> dict[str, float]:
    """Medians over ``rounds`` of (takeover_s, caller_learned_s)."""
    results = [asyncio.run(one_round(url, store, tasks)) for _ in range(rounds)]
    progress(f"takeover rounds (s): {[(round(t, 3), round(c, 3)) for t, c in results]}")
    return {
        "takeover_s": round(statistics.median(t for t, _ in results), 3),
        "caller_learned_s": round(statistics.median(c for _, c in results), 3),
    }


def main() -> None:
    parser = base_arguments(__doc__.splitlines()[0])
    parser.add_argument(
        "--store", required=True, help="postgresql://USER@HOST:PORT/DB (password: $MESH_STORE_PASSWORD)"
    )
    parser.add_argument("--tasks", type=int, default=5, help="running tasks on the replica that dies")
    args = parser.parse_args()
    with broker_url(args.broker) as url:
        emit({**measure(url, args.store, args.tasks), "rounds": ROUNDS, "tasks": args.tasks})


if __name__ == "__main__":
    main()
