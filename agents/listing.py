"""``tasks/list``: one page of an agent's tasks, newest status first, filtered by state and context.

The order is (status timestamp, task id), newest first; a page token is the position of the
last task of the previous page, so a page continues where the previous one stopped even when
tasks were added or forgotten in between. Pages are bounded by ``pageSize`` (at most
:data:`~mesh.a2a.params.MAX_TASK_PAGE_SIZE`), each task by ``historyLength`` and, unless
``includeArtifacts``, without its artifacts.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable

from agents.tasks import TaskRecord
from mesh.a2a import InvalidParams, TaskListParams, TaskListResult

__all__ = ["list_tasks", "page_token"]

#: A position in the list's order: (status timestamp, task id).
Position = tuple[str, str]


def page_token(position: Position) -> str:
    """The opaque ``nextPageToken`` of a position."""
    return base64.urlsafe_b64encode(json.dumps(position, separators=(",", ":")).encode()).decode()


def _position(token: str) -> Position:
    try:
        stamp, task_id = json.loads(base64.urlsafe_b64decode(token.encode()))
    except (ValueError, TypeError, binascii.Error):
        stamp = task_id = None
    if type(stamp) is not str or type(task_id) is not str:
        raise InvalidParams(
            "invalid params for tasks/list: pageToken is not a token this agent issued; "
            "pass the nextPageToken of the previous page, or leave it out for the first page",
            data={"path": "params.pageToken"},
        )
    return stamp, task_id


def list_tasks(records: Iterable[TaskRecord], params: TaskListParams) -> TaskListResult:
    """The page of ``records`` that ``params`` asks for."""
    rows: list[tuple[Position, TaskRecord]] = []
    for record in records:
        if params.context_id is not None and record.context_id != params.context_id:
            continue
        if params.status is not None and record.state is not params.status:
            continue
        rows.append(((record.task.status.timestamp or "", record.id), record))
    rows.sort(key=lambda row: row[0], reverse=True)
    total = len(rows)
    if params.page_token:
        after = _position(params.page_token)
        rows = [row for row in rows if row[0] < after]
    page = rows[: params.page_size]
    more = len(rows) > params.page_size
    tasks = []
    for _, record in page:
        task = record.snapshot(params.history_length)
        if not params.include_artifacts:
            task.artifacts = None
        tasks.append(task)
    return TaskListResult(
        tasks=tasks,
        next_page_token=page_token(page[-1][0]) if more else "",
        page_size=params.page_size,
        total_size=total,
    )
