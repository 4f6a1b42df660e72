"""Who owns a task, and who may see it (DESIGN, "Tasks belong to their users").

A task's owner is the verified user of its request's token (``user:<sub>``), else the component
that sent the request (``agent:<name>``, ``gateway:<id>``, ``client:<name>``) as its caller token
proves it (:mod:`mesh.trust.callers`, checked by :class:`agents.guard.CallGuard`): never the
answer topic the request names, which is the sender's choice (any component may name another's,
and an effect such as a cancel or a push config needs no answer). A request with neither proof
makes a task only the agent's operators may act on. Only an agent without trusted keys (an open
mesh that asked for ``task_owner_checks``) falls back to the answer topic's component, a claim.
``tasks/get``, ``tasks/list``, ``tasks/cancel``, ``tasks/resubscribe``,
the push-config methods and a message continuing a task act only for its owner or one of the
agent's ``operators``; anyone else is told the task does not exist. Owners are journaled with
their tasks, so they survive a restart; a task with no recorded owner (journaled by a version
that kept none) is its operators' only.

The checks are on when the agent verifies user tokens (it has ``trust.token_issuers``, as under
``mesh up``) or ``task_owner_checks: true``; an open mesh, where anyone reads every topic anyway,
keeps them off unless asked.
"""

from __future__ import annotations

from collections.abc import Iterable

from mesh.trust import Identity
from topics import (
    AGENT_RESPONSE_TOPIC,
    AGENT_STATUS_TOPIC,
    CLIENT_RESPONSE_TOPIC,
    CLIENT_STATUS_TOPIC,
    GATEWAY_RESPONSE_TOPIC,
    GATEWAY_STATUS_TOPIC,
)

__all__ = ["TaskOwners", "caller_of", "owner_of"]

_CALLERS = (
    ("agent", AGENT_RESPONSE_TOPIC, "delegating_agent_name"),
    ("agent", AGENT_STATUS_TOPIC, "delegating_agent_name"),
    ("gateway", GATEWAY_RESPONSE_TOPIC, "gateway_id"),
    ("gateway", GATEWAY_STATUS_TOPIC, "gateway_id"),
    ("client", CLIENT_RESPONSE_TOPIC, "client_id"),
    ("client", CLIENT_STATUS_TOPIC, "client_id"),
)


def caller_of(reply_topic: str | None, namespace: str) -> str | None:
    """``kind:name`` of the component whose answer topic ``reply_topic`` is, else None."""
    if not reply_topic:
        return None
    for kind, template, param in _CALLERS:
        found = template.match(reply_topic)
        if found is not None and found["namespace"] == namespace:
            return f"{kind}:{found[param]}"
    return None


def owner_of(identity: Identity, caller: str | None) -> str | None:
    """The owner a request gives the task it creates (or claims when it reads one): the verified
    user, else the ``caller`` component (:meth:`agents.guard.CallGuard.caller`)."""
    if identity.verified and identity.user_id:
        return f"user:{identity.user_id}"
    return caller


class TaskOwners:
    """Whether a caller may act on a task: its owner, or one of the agent's operators."""

    def __init__(self, enabled: bool, operators: Iterable[str] = ()) -> None:
        self.enabled = enabled
        self.operators = frozenset(operators)

    def is_operator(self, caller: str | None) -> bool:
        return caller is not None and caller in self.operators

    def allows(self, owner: str | None, caller: str | None) -> bool:
        if not self.enabled:
            return True
        if caller is not None and caller in self.operators:
            return True
        return owner is not None and owner == caller
