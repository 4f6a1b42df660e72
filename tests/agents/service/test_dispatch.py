"""The handler table: built from the method table, one typed handler per method."""

from __future__ import annotations

from typing import get_type_hints

import pytest

from agents.answers import Route
from agents.dispatch import handler_table, serves
from mesh.a2a import Method, TaskIdParams, TaskQueryParams
from mesh.properties import MessageProperties
from tests.agents.service_agents import Echo
from tests.conftest import ServeAgent


class OnlyGet:
    @serves(Method.tasks_get)
    def get(self, params: TaskQueryParams, props: MessageProperties, route: Route) -> None:
        return None


async def test_an_agent_serves_every_method_with_its_params_model(serve_agent: ServeAgent) -> None:
    service = await serve_agent(Echo())
    table = service.dispatcher.handlers
    assert set(table) == set(Method)
    for method, handler in table.items():
        assert handler.__self__ is service.methods
        assert get_type_hints(handler)["params"] is method.params


def test_a_method_without_a_handler_is_refused() -> None:
    with pytest.raises(TypeError) as info:
        handler_table(OnlyGet())
    message = str(info.value)
    assert message.startswith("OnlyGet has no handler for message/send, message/stream, tasks/cancel,")
    assert "tasks/get" not in message and "@serves(...)" in message


def test_a_handler_typed_against_another_model_is_refused() -> None:
    class Mistyped(OnlyGet):
        @serves(Method.tasks_cancel)
        def cancel(self, params: TaskQueryParams, props: MessageProperties, route: Route) -> None:
            return None

    with pytest.raises(TypeError, match=r"Mistyped.cancel serves tasks/cancel, whose params are TaskIdParams"):
        handler_table(Mistyped())


def test_two_handlers_for_one_method_are_refused() -> None:
    class Twice(OnlyGet):
        @serves(Method.tasks_get)
        def get_again(self, params: TaskQueryParams, props: MessageProperties, route: Route) -> None:
            return None

    with pytest.raises(TypeError, match="tasks/get has two handlers"):
        handler_table(Twice())


def test_the_refusal_names_only_the_methods_left_without_a_handler() -> None:
    class Cancels(OnlyGet):
        @serves(Method.tasks_cancel)
        def cancel(self, params: TaskIdParams, props: MessageProperties, route: Route) -> None:
            return None

    with pytest.raises(TypeError) as info:
        handler_table(Cancels())
    assert "tasks/cancel" not in str(info.value) and "tasks/get" not in str(info.value)
