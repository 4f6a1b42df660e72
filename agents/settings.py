"""How the runtime serves an agent: limits, presence, retention, delegation.

The field names are the YAML keys of an agent entry (see :mod:`agents.config`).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from mesh.limits import MessageLimits
from mesh.profile.emqx import EmqxProfile


class _Settings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DelegationSettings(_Settings):
    """Calls this agent makes to other agents."""

    max_call_depth: int = Field(10, ge=0, description="refuse a call deeper than this chain length")
    allow_cycles: bool = Field(False, description="allow A -> B -> A in one call chain")
    timeout_s: float = Field(600.0, gt=0, description="idle time before a sub-task is canceled")
    allow: tuple[str, ...] = Field(("*",), description="fnmatch patterns of peers it may call")
    deny: tuple[str, ...] = Field((), description="fnmatch patterns of peers it may not call")


class AgentSettings(_Settings):
    """Runtime options of one agent."""

    card_interval_s: float = Field(10.0, gt=0, description="the SAM heartbeat's interval (with sam_heartbeat)")
    discovery_ttl_s: float = Field(60.0, gt=0, description="forget a SAM agent whose heartbeats stopped this long")
    sam_heartbeat: bool = Field(
        False, description="also publish the card on SAM's bare agentcards topic every card_interval_s (SAM meshes)"
    )
    shared_subscription: bool = Field(False, description="replicas share requests via $share/<agent>/")
    name_check_timeout_s: float | None = Field(
        2.0, gt=0, description="at start, wait this long for a live instance of the name to answer (None: no check)"
    )
    push_notifications: bool = Field(True, description="serve the pushNotificationConfig methods")
    allow_private_push_urls: bool = Field(False, description="allow push URLs on loopback/private networks")
    push_timeout_s: float = Field(5.0, gt=0, description="timeout of one push POST")
    max_concurrent_tasks: int = Field(
        1000, gt=0, description="tasks running at once; beyond it new messages wait in the broker's queue"
    )
    stall_timeout_s: float | None = Field(
        600.0, gt=0, description="fail a running task that emitted no event for this long (None: never)"
    )
    task_retention_s: float = Field(3600.0, gt=0, description="keep finished tasks this long for tasks/get")
    max_retained_tasks: int = Field(10_000, gt=0, description="finished tasks kept at most")
    max_retained_bytes: int = Field(
        64_000_000, gt=0, description="JSON bytes of the finished tasks kept at most (oldest go first)"
    )
    max_unacked_requests: int = Field(
        64,
        gt=0,
        le=65535,
        description="requests the broker may deliver before the task store acknowledged them (Receive Maximum)",
    )
    task_store: str = Field(
        "",
        description="SQLite file of the tasks ('': <state dir>/<namespace>/<agent>.sqlite3; ':memory:': not kept)",
    )
    store: str = Field(
        "",
        description="a postgresql:// URL: the tasks go to PostgreSQL, shared by the agent's replicas ('': task_store); "
        "the password from $MESH_STORE_PASSWORD or the file $MESH_STORE_PASSWORD_FILE names",
    )
    on_owner_lost: Literal["fail", "resume"] = Field(
        "fail",
        description="with a shared store, what another replica does with the running tasks of a replica that died: "
        "fail them saying why, or resume them (workflows, from their recorded nodes; other agents: fail)",
    )
    task_lease_s: float = Field(
        10.0, gt=0, description="with a shared store, a replica silent this long loses its running tasks to another"
    )
    require_user_token: bool = Field(
        False, description="refuse requests without a valid user token from a trusted issuer (-32020)"
    )
    task_owner_checks: bool | None = Field(
        None,
        description="act on a task (get, list, cancel, resubscribe, push config) only for its owner or an operator "
        "(None: when the agent verifies user tokens, trust.token_issuers)",
    )
    operators: tuple[str, ...] = Field(
        (),
        description="who may act on every task: 'user:<id>' (a verified user), 'client:<name>', 'gateway:<id>', "
        "'agent:<name>'",
    )
    context_history_limit: int = Field(100, gt=0, description="messages kept per contextId")
    input_timeout_s: float | None = Field(None, gt=0, description="cancel a task left input-required this long")
    emqx: EmqxProfile | None = Field(
        None, description="also serve the EMQX 'A2A over MQTT' profile as {org}/{unit}/{agent} (off: null)"
    )
    # Request size limits (the JAF spec's defaults), shared with the gateways.
    limits: MessageLimits = Field(default_factory=MessageLimits)
    delegation: DelegationSettings = Field(default_factory=DelegationSettings)
