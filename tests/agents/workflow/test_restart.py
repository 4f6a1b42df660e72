"""A workflow agent killed mid-run (SIGKILL) resumes from its finished nodes (and map items) when started again."""

from __future__ import annotations

import contextlib
import sqlite3
import textwrap
from pathlib import Path

from agents import AgentSettings
from agents.workflow import workflow_store_path
from mesh.a2a import DataPart, Task, TaskState
from mesh.client import MeshClient
from tests.agents.test_durable_tasks import until
from tests.agents.workflow_agents import Holder, Upper
from tests.conftest import ServeAgent
from tests.mesh.cli_process import Service, start_mesh
from tests.support import wait_until

MEMORY = AgentSettings(task_store=":memory:")


def stored_node(store: Path, task_id: str, node: str) -> bool:
    """Whether the workflow's store has committed the node's row (read from outside)."""
    with contextlib.closing(sqlite3.connect(f"{store.as_uri()}?mode=ro", uri=True)) as db:
        query = "SELECT 1 FROM workflow_nodes WHERE task_id = ? AND node = ?"
        return db.execute(query, (task_id, node)).fetchone() is not None


async def run_workflow_process(config: Path) -> Service:
    run = await start_mesh("run", str(config))
    await run.wait_for_line("agent durable serving")
    return run


async def test_a_killed_workflow_resumes_from_its_finished_nodes(
    serve_agent: ServeAgent, client: MeshClient, broker_url: str, namespace: str, tmp_path: Path
) -> None:
    upper, holder = Upper(), Holder(passes=("x",))
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
                workflow:
                  nodes:
                    - {{id: first, agent: upper, input: "one"}}
                    - {{id: second, agent: holder, input: "{{{{ first.output.text }}}}"}}
                    - {{id: third, agent: upper, input: "{{{{ second.output.text }}}}"}}
                    - {{id: each, map: "{{{{ ['x', 'wait'] }}}}", agent: holder, input: "{{{{ item }}}}"}}
                  output: {{result: "{{{{ third.output.text }}}}", each: "{{{{ each.output.text }}}}"}}
            """
        )
    )
    run = await run_workflow_process(config)
    try:
        submitted = await client.send("durable", "go", blocking=False)
        assert isinstance(submitted, Task)
        # first done; second in flight; of the map's items, x done and "wait" in flight.
        started = ["ONE", "wait", "x"]
        await wait_until(lambda: sorted(holder.started) == started, holder.changed, 10, lambda: f"{holder.started}")
        assert upper.calls == ["one"]
        # The map item's row is written after its answer came: wait for it (another process's file).
        store = workflow_store_path({}, namespace, "durable")
        assert store is not None
        await until(lambda: stored_node(store, submitted.id, "each[0]"))
        run.proc.kill()  # SIGKILL: no cleanup of any kind
        await run.stop()

        run = await run_workflow_process(config)
        # The node in flight is sent again; the finished one is not run again.
        again = sorted([*started, "ONE", "wait"])
        await wait_until(lambda: sorted(holder.started) == again, holder.changed, 10, lambda: f"{holder.started}")
        assert upper.calls == ["one"]
        following = client.resubscribe("durable", submitted.id)
        first = await anext(following)
        assert isinstance(first, Task) and first.status.state is TaskState.working
        holder.release.set()
        items = [item async for item in following]
        final = items[-1]
        assert isinstance(final, Task) and final.status.state is TaskState.completed, final
        assert final.status.message is not None
        data = next(p.data for p in final.status.message.parts if isinstance(p, DataPart))
        assert data == {"result": "HELD ONE", "each": "passed x\nheld wait"}
        assert holder.started.count("x") == 1  # the finished map item was not sent again
        assert upper.calls == ["one", "held ONE"]
        got = await client.get_task("durable", submitted.id)
        assert got.status.state is TaskState.completed
    finally:
        code = await run.stop()
    assert code == 0, run.output
