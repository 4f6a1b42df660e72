"""A workflow agent killed mid-run (SIGKILL) resumes from its finished nodes when started again."""

from __future__ import annotations

import textwrap
from pathlib import Path

from agents import AgentSettings
from mesh.a2a import DataPart, Task, TaskState
from mesh.client import MeshClient
from tests.agents.workflow_agents import Holder, Upper
from tests.conftest import ServeAgent
from tests.mesh.cli_process import Service, start_mesh
from tests.support import wait_until

MEMORY = AgentSettings(task_store=":memory:")


async def run_workflow_process(config: Path) -> Service:
    run = await start_mesh("run", str(config))
    await run.wait_for_line("agent durable serving")
    return run


async def test_a_killed_workflow_resumes_from_its_finished_nodes(
    serve_agent: ServeAgent, client: MeshClient, broker_url: str, namespace: str, tmp_path: Path
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
                workflow:
                  nodes:
                    - {{id: first, agent: upper, input: "one"}}
                    - {{id: second, agent: holder, input: "{{{{ first.output.text }}}}"}}
                    - {{id: third, agent: upper, input: "{{{{ second.output.text }}}}"}}
                  output: {{result: "{{{{ third.output.text }}}}"}}
            """
        )
    )
    run = await run_workflow_process(config)
    try:
        submitted = await client.send("durable", "go", blocking=False)
        assert isinstance(submitted, Task)
        await wait_until(lambda: holder.started == ["ONE"], holder.changed, 10, lambda: f"{holder.started}")
        assert upper.calls == ["one"]
        run.proc.kill()  # SIGKILL: no cleanup of any kind
        await run.stop()

        run = await run_workflow_process(config)
        # The node in flight is sent again; the finished one is not run again.
        await wait_until(lambda: holder.started == ["ONE", "ONE"], holder.changed, 10, lambda: f"{holder.started}")
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
        assert data == {"result": "HELD ONE"}
        assert upper.calls == ["one", "held ONE"]
        got = await client.get_task("durable", submitted.id)
        assert got.status.state is TaskState.completed
    finally:
        code = await run.stop()
    assert code == 0, run.output
