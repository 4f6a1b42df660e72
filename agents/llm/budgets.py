"""Token budgets per user and per agent, and the usage record (``mesh usage``), at each model request.

:class:`MeteredModel` wraps the agent's model: before each model request it checks the run's
budgets against the usage store's counters (one primary-key read each, :mod:`mesh.telemetry.usage`;
from a cache the store refreshes in its thread when it is PostgreSQL, :mod:`mesh.telemetry.pgusage`), and
after each response it stores what the response used (tokens, and the cost genai-prices gives
where it knows the model) and adds it to the counters. Over a budget the request is not made
and the task fails naming the budget, its period and when it resets.

Who a user is, for ``per_user``: the verified user (a trusted token's subject), else the calling
component the broker or its token proved (``client:cli``), never a ``userId`` the sender chose.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import time
from collections.abc import AsyncIterator
from concurrent.futures import Future
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models import ModelRequestParameters, StreamedResponse
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings
from pydantic_ai.tools import RunContext

from agents.llm.config import Budget, LlmConfig
from mesh.telemetry.usage import Counter, UsageRow, UsageStore, open_usage_store, window_of

if TYPE_CHECKING:
    from agents.context import TaskContext

__all__ = ["CURRENT_METER", "BudgetExceeded", "Meter", "MeteredModel", "UsageStores", "cost_of", "who"]

log = logging.getLogger(__name__)


class BudgetExceeded(Exception):
    """A budget is spent: the task fails with this message."""


def who(ctx: TaskContext) -> str:
    """The user a budget counts: verified, else the proven caller, else ``unknown``."""
    if ctx.user_verified and ctx.user_id:
        return ctx.user_id
    return ctx.caller or "unknown"


def cost_of(response: ModelResponse) -> Decimal | None:
    """The response's cost in USD from genai-prices (None: the model or provider has no price)."""
    if response.usage.cost is not None:
        return response.usage.cost
    try:
        return response.cost().total_price
    except (AssertionError, LookupError, ValueError):
        return None


@dataclass
class Meter:
    """One run's budgets and usage record: who, which counters, and the store."""

    store: UsageStore
    agent: str
    user: str
    model: str
    budgets: list[tuple[str, Budget, Counter]] = field(default_factory=list)
    #: This run's totals so far (the answer's metadata).
    cost_usd: Decimal | None = None

    @classmethod
    def of(cls, store: UsageStore, config: LlmConfig, ctx: TaskContext) -> Meter:
        user = who(ctx)
        meter = cls(store=store, agent=ctx.agent_name, user=user, model=config.model)
        if (b := config.budgets.per_user) is not None:
            meter.budgets.append(("per_user", b, Counter("user", user, b.period_s)))
        if (b := config.budgets.per_agent) is not None:
            meter.budgets.append(("per_agent", b, Counter("agent", ctx.agent_name, b.period_s)))
        return meter

    def unread(self, now: float | None = None) -> Future[None] | None:
        """None, else a future done once the store read the counters it did not know (a shared
        store's first check of a counter: awaited, so the loop never waits on the network)."""
        if not self.budgets:
            return None
        return self.store.prefetch((c for _name, _budget, c in self.budgets), time.time() if now is None else now)

    def check(self, now: float | None = None) -> None:
        """Raise :class:`BudgetExceeded` if a budget of this run is spent."""
        if not self.budgets:
            return
        at = time.time() if now is None else now
        for name, budget, counter in self.budgets:
            used = self.store.spent(counter, at)
            if used >= budget.tokens:
                resets = window_of(counter.period_s, at) + counter.period_s
                when = datetime.datetime.fromtimestamp(resets, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
                whose = f"user {self.user!r}" if counter.scope == "user" else f"agent {self.agent!r}"
                raise BudgetExceeded(
                    f"the {name} budget of {budget.tokens} tokens per {budget.period} is spent for {whose} "
                    f"({used} used); it resets at {when} (llm.budgets.{name})"
                )

    async def admit(self) -> None:
        """Before a model request: raise :class:`BudgetExceeded` if a budget of this run is spent
        (a shared store's first read of a counter awaited off the loop)."""
        if not self.budgets:
            return
        now = time.time()  # one window for both
        if (unread := self.unread(now)) is not None:
            await asyncio.wrap_future(unread)
        self.check(now)

    def record(self, response: ModelResponse) -> None:
        usage = response.usage
        cost = cost_of(response)
        if cost is not None:
            self.cost_usd = (self.cost_usd or Decimal(0)) + cost
        row = UsageRow(
            at=time.time(),
            agent=self.agent,
            user=self.user,
            model=response.model_name or self.model,
            requests=1,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cache_read_tokens=usage.cache_read_tokens,
            cache_write_tokens=usage.cache_write_tokens,
            cost_usd=float(cost) if cost is not None else None,
        )
        try:
            self.store.add(row, tuple(c for _name, _budget, c in self.budgets))
        except Exception as exc:  # a full disk must not fail the task the tokens were spent on
            log.warning("agent %s: the usage store did not take a record: %s", self.agent, exc)
            # (A shared store takes rows into memory and writes them in its thread; it logs its own outages.)


#: The meter of the run this task is in (set by :class:`~agents.llm.run.LlmRun` around its run;
#: the model requests run in that task or in tasks it starts, which inherit it).
CURRENT_METER: ContextVar[Meter | None] = ContextVar("llm_meter", default=None)


class MeteredModel(WrapperModel):
    """The budget check before each model request and the usage record after its response.

    A model wrapper, not a pydantic-ai capability: a capability's hooks copy the run's context
    at each step of every run (some 45 us a run), a wrapper costs only the check and the record.
    """

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        meter = CURRENT_METER.get()
        if meter is not None:
            await meter.admit()
        response = await self.wrapped.request(messages, model_settings, model_request_parameters)
        if meter is not None:
            meter.record(response)
        return response

    @asynccontextmanager
    async def request_stream(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
        run_context: RunContext[Any] | None = None,
    ) -> AsyncIterator[StreamedResponse]:
        meter = CURRENT_METER.get()
        if meter is not None:
            await meter.admit()
        async with self.wrapped.request_stream(messages, model_settings, model_request_parameters, run_context) as s:
            yield s
        if meter is not None:  # the whole response streamed: its usage is known
            meter.record(s.get())


class UsageStores:
    """The agent's usage store, opened at its first use (its namespace and task store are known then)."""

    def __init__(self, setting: str) -> None:
        self.setting = setting
        self.store: UsageStore | None = None

    def get(self, namespace: str, task_store: str = "") -> UsageStore:
        """The store ``usage_store`` names, else the agent's ``store:`` or ``$MESH_STORE`` when PostgreSQL."""
        if self.store is None:
            self.store = open_usage_store(namespace, self.setting, task_store=task_store)
        return self.store

    def close(self) -> None:
        store, self.store = self.store, None
        if store is not None:
            store.close()
