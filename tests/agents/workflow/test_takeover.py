"""A workflow's replicas on PostgreSQL (``store:``): when the replica running a run dies, another
takes the task over and resumes it from the nodes the dead one recorded (``on_owner_lost: resume``)."""

from __future__ import annotations

import asyncio
import textwrap
from pathlib import Path

from agents import AgentSettings
from mesh.a2a import DataPart, Task, TaskState
from mesh.client import MeshClient
from mesh.store import StoreUrl
from mesh.store.postgres import connect
from tests.agents.test_durable_tasks import until
from tests.agents.workflow_agents import Holder, Upper
from tests.conftest import ServeAgent
from tests.mesh.cli_process import Service, start_mesh
from tests.postgres import PostgresServer
from tests.support import wait_until

MEMORY = AgentSettings(task_store=":memory:")


def node_stored(server: PostgresServer, namespace: str, task_id: str, node: str) -> bool:
    with connect(StoreUrl(server.url, server.password)) as db:
        query = (
            "SELECT 1 FROM mesh_workflow_nodes WHERE namespace = %s AND agent = 'durable' AND task_id = %s "
            "AND node = %s"
        )
        return db.execute(query, (namespace, task_id, node)).fetchone() is not None


async def replica(config: Path, server: PostgresServer) -> Service:
    run = await start_mesh("run", str(config), **server.env)
    await run.wait_for_line("agent durable serving")
    return run


async def test_a_dead_replicas_workflow_resumes_on_another_from_its_recorded_nodes(
    serve_agent: ServeAgent,
    client: MeshClient,
    broker_url: str,
    namespace: str,
    tmp_path: Path,
    postgres_server: PostgresServer,
) -> None:
    upper, holder = Upper(), Holder()
    await serve_agent(upper, MEMORY)
    await serve_agent(holder, MEMORY)
    config = tmp_path / "flows.yaml"
    config.write_text(
        textwrap.dedent(
            f"""
            namespace: {namespace}
            broker: {broker_url}
            agents:
              - name: durable
                shared_subscription: true
                store: {postgres_server.url}
                on_owner_lost: resume
                workflow:
                  nodes:
                    - {{id: first, agent: upper, input: "one"}}
                    - {{id: second, agent: holder, input: "{{{{ first.output.text }}}}"}}
                  output: {{result: "{{{{ second.output.text }}}}"}}
            """
        )
    )
    dead = await replica(config, postgres_server)  # alone: the run is its
    runs = [dead]
    try:
        await client.wait_for_agent("durable", 10)
        submitted = await client.send("durable", "go", blocking=False)
        assert isinstance(submitted, Task)
        await wait_until(lambda: holder.started == ["ONE"], holder.changed, 10, lambda: f"{holder.started}")
        assert upper.calls == ["one"]
        await until(lambda: node_stored(postgres_server, namespace, submitted.id, "first"))
        runs.append(await replica(config, postgres_server))
        dead.proc.kill()  # SIGKILL: its will tells the other replica
        await dead.stop()
        # The other takes the task over: the node in flight is sent again, the finished one is not.
        await wait_until(lambda: holder.started == ["ONE", "ONE"], holder.changed, 15, lambda: f"{holder.started}")
        assert upper.calls == ["one"]
        holder.release.set()
        async with MeshClient.connect(broker_url, namespace) as fresh, asyncio.timeout(15):
            # It knows no owner: the survivor answers, from the store, until the run has ended.
            while (final := await fresh.get_task("durable", submitted.id)).status.state is not TaskState.completed:
                await asyncio.sleep(0.05)
        assert final.status.message is not None
        data = next(p.data for p in final.status.message.parts if isinstance(p, DataPart))
        assert data == {"result": "held ONE"}
    finally:
        for run in runs:
            if run.proc.returncode is None:
                await run.stop()
