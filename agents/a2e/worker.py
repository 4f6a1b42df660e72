"""An agent whose handler is a worker process in any language, speaking A2E over stdio.

The worker is the A2E host; this agent is its client. At setup the worker is started, the
handshake run and its skills discovered: they become the card's skills. Each task is one
``skill/call/req`` (``correlation_id`` = the task id); its events become status and artifact
updates, its response the task's end.

Cancel: A2E 1.0 has no cancel message. A canceled task ends on the mesh at once; the call
keeps its ``max_parallel`` slot until the worker answers, and that late answer is discarded.
A worker that accepts the ``cancel`` capability in its handshake also gets
``{"type": "skill/cancel", "req_id": <the call's id>}``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from agents.a2e.artifacts import ArtifactRequests
from agents.a2e.errors import WorkerGone, WorkerUnavailable
from agents.a2e.events import CallFailure, EventTranslator, outcome
from agents.a2e.messages import A2EEvent, SkillCallRequest, SkillDefinition
from agents.a2e.process import WorkerCommand, WorkerProcess
from agents.a2e.supervisor import SupervisorSettings, WorkerSupervisor
from agents.agent import Agent
from agents.context import TaskContext
from agents.updates import TaskFailed, Update
from mesh.a2a import AgentCard, AgentSkill, DataPart, Message, get_text_from_message

__all__ = ["WorkerAgent", "skill_card"]

log = logging.getLogger(__name__)


class WorkerAgent(Agent):
    """Serves the skills of a worker process; ``worker`` is a :class:`WorkerCommand`,
    an argv list or a command string.

    The other options tune the supervision (see :class:`SupervisorSettings`), the retries of
    calls the worker failed with a ``retryable`` error, and the ``timeout`` each call carries
    (``call_timeout_s``; with no answer ``answer_grace_s`` after it, the task fails).
    """

    description = "An agent served by an A2E worker process"
    input_modes = ("text/plain", "application/json")
    output_modes = ("text/plain", "application/json")

    def __init__(
        self,
        *,
        worker: WorkerCommand | str | Sequence[str],
        cwd: str | Path | None = None,
        env: Mapping[str, str] | None = None,
        call_retries: int = 2,
        retry_backoff_s: float = 0.2,
        call_timeout_s: int = 60,
        answer_grace_s: float = 5.0,
        name: str | None = None,
        description: str | None = None,
        version: str | None = None,
        **supervision: Any,
    ) -> None:
        super().__init__(name=name, description=description, version=version)
        self.command = worker if isinstance(worker, WorkerCommand) else WorkerCommand.of(worker, cwd=cwd, env=env)
        self.supervision = SupervisorSettings.of(
            "WorkerAgent", supervision, besides="call_retries, retry_backoff_s, call_timeout_s and answer_grace_s"
        )
        self.call_retries = call_retries
        self.retry_backoff_s = retry_backoff_s
        self.call_timeout_s = call_timeout_s
        # Beyond the ``timeout`` a call tells the worker, how long it may still take to answer.
        self.answer_grace_s = answer_grace_s
        self.worker_skills: list[SkillDefinition] = []
        self._supervisor: WorkerSupervisor | None = None
        self._artifacts = ArtifactRequests(self.name)

    async def setup(self) -> None:
        self._supervisor = WorkerSupervisor(
            self.command,
            name=self.name,
            settings=self.supervision,
            on_give_up=self.give_up,
            on_skills=self._set_skills,
        )
        await self._supervisor.start()

    async def teardown(self) -> None:
        if self._supervisor is not None:
            await self._supervisor.stop()

    def card(self, *, url: str, push_notifications: bool) -> AgentCard:
        card = super().card(url=url, push_notifications=push_notifications)
        return card.model_copy(update={"skills": [skill_card(s) for s in self.worker_skills]})

    async def process(self) -> WorkerProcess:
        """The worker process now running (waits while it restarts)."""
        if self._supervisor is None:
            raise WorkerUnavailable(f"worker agent {self.name!r} was not set up; serve it with AgentService")
        return await self._supervisor.current()

    # ------------------------------------------------------------------ tasks

    async def handle(self, message: Message, ctx: TaskContext) -> AsyncIterator[Update]:
        skill = self._skill_for(message, ctx)
        arguments = _arguments(message)
        for attempt in range(self.call_retries + 1):
            failure = None
            async with contextlib.aclosing(self._call(skill, arguments, ctx)) as items:
                async for item in items:
                    if isinstance(item, CallFailure):
                        failure = item
                    else:
                        yield item
            if failure is None:
                return
            if not failure.retryable or attempt == self.call_retries:
                retries = f" (after {attempt} retries)" if attempt else ""
                raise TaskFailed(
                    f"skill {skill!r} failed{retries}: {failure}",
                    data={"code": failure.code, "message": failure.message, "retryable": failure.retryable},
                )
            delay = self.retry_backoff_s * 2**attempt
            log.info("%s: task %s: retrying %s in %.2f s (%s)", self.name, ctx.task_id, skill, delay, failure)
            await asyncio.sleep(delay)  # the retry backoff

    async def _call(
        self, skill: str, arguments: dict[str, Any], ctx: TaskContext
    ) -> AsyncGenerator[Update | CallFailure, None]:
        """One ``skill/call``: its updates, then the Reply or the failure the worker answered."""
        request = SkillCallRequest(
            name=skill,
            arguments=arguments,
            correlation_id=ctx.task_id,
            timeout=self.call_timeout_s,
            metadata={"context_id": ctx.context_id, "user_id": ctx.user_id},
        )
        while True:
            try:
                process = await self.process()
                process.on_request = self._artifacts.handle
                self._artifacts.contexts[request.id] = ctx
                call = await process.open_call(request)
                break
            except WorkerGone as exc:
                if exc.sent:
                    raise TaskFailed(str(exc)) from None
                self._artifacts.contexts.pop(request.id, None)
                request.new_id()  # not sent: the worker died first; the next one takes the call
            except WorkerUnavailable as exc:
                raise TaskFailed(str(exc)) from None
        translator = EventTranslator(self.name, ctx.task_id)
        deadline = asyncio.get_running_loop().time() + self.call_timeout_s + self.answer_grace_s
        try:
            while True:
                answer = await call.next(deadline - asyncio.get_running_loop().time())
                if not isinstance(answer, A2EEvent):
                    break
                for update in translator.accept(answer):
                    yield update
            for update in translator.flush():
                yield update
        except WorkerGone as exc:
            raise TaskFailed(str(exc)) from None
        except TimeoutError:
            raise TaskFailed(
                f"timeout: worker {self.name!r} did not answer skill {skill!r} within {self.call_timeout_s} s "
                "(the call's timeout); its late answer will be discarded",
                data={"code": "timeout"},
            ) from None
        finally:
            process.abandon(call)  # a no-op once answered; else the late answer is discarded
            self._artifacts.contexts.pop(request.id, None)
        yield outcome(answer)

    def _skill_for(self, message: Message, ctx: TaskContext) -> str:
        names = [s.name for s in self.worker_skills]
        asked = (message.metadata or {}).get("skill") or ctx.metadata.get("skill")
        if asked is None:
            if len(names) == 1:
                return names[0]
            raise TaskFailed(
                f"agent {self.name!r} serves {len(names)} skills ({', '.join(names) or 'none'}); name one: "
                f"mesh send {self.name} --skill {names[0] if names else '<name>'} ..., or in the message's "
                'metadata as {"skill": "<name>"}'
            )
        if asked not in names:
            raise TaskFailed(
                f"unknown_skill: agent {self.name!r} has no skill {asked!r}; "
                f"its skills are: {', '.join(names) or 'none'} (mesh send {self.name} --skill NAME ...)",
                data={"code": "unknown_skill", "skill": asked, "skills": names},
            )
        return str(asked)

    def _set_skills(self, skills: Sequence[SkillDefinition]) -> None:
        self.worker_skills = list(skills)


def _arguments(message: Message) -> dict[str, Any]:
    for part in message.parts:
        if isinstance(part, DataPart):
            return dict(part.data)
    return {"text": get_text_from_message(message)}


def skill_card(skill: SkillDefinition) -> AgentSkill:
    """The card entry for a worker's skill: examples from its triggers, else its argument hint."""
    examples = list(skill.triggers) or ([skill.argument_hint] if skill.argument_hint else [])
    tags = list(skill.tags) + ([skill.category] if skill.category and skill.category not in skill.tags else [])
    return AgentSkill(
        id=skill.name,
        name=skill.name,
        description=skill.description or skill.when_to_use or skill.name,
        tags=tags,
        examples=examples or None,
    )
