"""The agents' tasks/list lists every caller's tasks: the HTTP edge does not forward it."""

from __future__ import annotations

import pytest

from gateways.http.rpc import parse_call
from mesh.a2a import MethodNotFound


def test_a_0_3_tasks_list_is_not_forwarded() -> None:
    with pytest.raises(MethodNotFound, match="not served over HTTP: list your own tasks with") as info:
        parse_call(b'{"jsonrpc": "2.0", "id": 7, "method": "tasks/list", "params": {}}', None)
    assert info.value.request_id == 7
    listed = parse_call(b'{"jsonrpc": "2.0", "id": 8, "method": "ListTasks", "params": {}}', "1.0")
    assert listed.mesh_method is None  # the gateway answers it from the caller's own tasks
