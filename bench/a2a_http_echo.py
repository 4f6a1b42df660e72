"""The competitor for the benchmarks: an echo agent behind the a2a-sdk HTTP server.

What a user would pick instead of the mesh: a2a-sdk's DefaultRequestHandler with an
in-memory task store and its JSON-RPC routes on uvicorn, serving A2A 1.0 and 0.3 clients on
the same URL. The agent does what the mesh's echo does: the task completes with the text it
was sent as its status message.

    python bench/a2a_http_echo.py PORT     # prints "ready" once it listens
"""

from __future__ import annotations

import asyncio
import sys

import uvicorn
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events.event_queue import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks.inmemory_task_store import InMemoryTaskStore
from a2a.server.tasks.task_updater import TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Part,
    Task,
    TaskState,
    TaskStatus,
)
from starlette.applications import Starlette


class Echo(AgentExecutor):
    async def execute(self, ctx: RequestContext, queue: EventQueue) -> None:
        await queue.enqueue_event(
            Task(
                id=ctx.task_id,
                context_id=ctx.context_id,
                status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                history=[ctx.message],
            )
        )
        updater = TaskUpdater(queue, ctx.task_id, ctx.context_id)
        await updater.start_work()
        await updater.complete(message=updater.new_agent_message([Part(text=ctx.get_user_input())]))

    async def cancel(self, ctx: RequestContext, queue: EventQueue) -> None:
        await TaskUpdater(queue, ctx.task_id, ctx.context_id).cancel()


def app(port: int) -> Starlette:
    url = f"http://127.0.0.1:{port}/"
    card = AgentCard(
        name="echo",
        description="Echo",
        version="1.0.0",
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="echo", name="echo", description="echo", tags=["echo"])],
        supported_interfaces=[
            AgentInterface(protocol_binding="JSONRPC", protocol_version="1.0", url=url),
            AgentInterface(protocol_binding="JSONRPC", protocol_version="0.3", url=url),
        ],
    )
    handler = DefaultRequestHandler(agent_executor=Echo(), task_store=InMemoryTaskStore(), agent_card=card)
    return Starlette(
        routes=[*create_agent_card_routes(card), *create_jsonrpc_routes(handler, rpc_url="/", enable_v0_3_compat=True)]
    )


async def main(port: int) -> None:
    server = uvicorn.Server(
        uvicorn.Config(app(port), host="127.0.0.1", port=port, log_level="warning", access_log=False)
    )
    serving = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
    print("ready", flush=True)
    await serving


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
