"""Exceptions raised by the mesh core.

Every exception the ``mesh`` package raises on purpose derives from :class:`MeshError`::

    MeshError
    ├── TransportError              talking to the broker failed
    │   ├── ConnectError            could not connect (refused, DNS, TLS, CONNACK reason)
    │   ├── NotConnectedError       the operation needs a live connection and none came in time
    │   ├── PublishError            the broker refused a publish (carries the reason code)
    │   │   ├── NotAuthorizedError  PUBACK 0x87 or CONNACK "not authorized"
    │   │   ├── PacketTooLargeError larger than the broker's Maximum Packet Size
    │   │   ├── QuotaExceededError  PUBACK 0x97
    │   │   └── NoSubscribersError  PUBACK 0x10, when the publisher asked to know
    │   ├── SubscribeError          SUBACK refused a filter
    │   ├── PublishTimeoutError     no PUBACK in time
    │   └── RequestTimeoutError     no reply to a request in time
    │       └── CallTimeoutError    a call to an agent went silent or ran past its deadline
    ├── ProtocolError               a message broke the A2A / JSON-RPC contract
    │   └── IllegalTransitionError  a task state change the state machine forbids
    ├── AgentNotFoundError          no card of the agent on the mesh (lists those that are)
    ├── AgentUnavailableError       a call's agent is not there: nobody listens, or it went away
    ├── AgentNameTakenError         a live instance already serves this agent name
    ├── TrustError                  a card signature or a user token failed verification
    └── ConfigError                 a configuration file or value is wrong

Messages name the bad value and say what to do about it.
"""

from __future__ import annotations

import difflib


def short_repr(value: object, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters, its closing quote or bracket kept: how an
    error message quotes a bad value that may be huge."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 4] + "..." + text[-1]


class MeshError(Exception):
    """Root of every error the mesh raises on purpose."""


class TransportError(MeshError):
    """Talking to the MQTT broker failed."""

    #: Where a refusal came from: the broker and the broker user of the connection it refused
    #: (what :func:`mesh.brokertools.refusals.refusal_fix` explains).
    broker_url: str | None = None
    broker_user: str | None = None

    def refused_as(self, url: str, user: str | None) -> TransportError:
        """This error, marked as a refusal of broker user ``user`` by the broker at ``url``."""
        self.broker_url, self.broker_user = url, user
        return self


class ConnectError(TransportError):
    """The connection to the broker could not be made.

    The message says why and what to do (:mod:`mesh.transport.tls`): nothing listens, the broker's
    certificate is not trusted or names another host, the broker requires or refuses the client
    certificate, the URL's scheme does not match the port (TLS vs plain), or the CONNACK's reason.
    """

    #: The CONNACK's failure reason code, when the broker refused the connection.
    reason_code: int | None = None
    #: The end of the message that guesses the way out without knowing this machine (a refused
    #: anonymous login: "it may still want a user name and password"), "" when there is none.
    hint: str = ""


class NotConnectedError(TransportError):
    """The operation needs a live broker connection and none was available in time."""


class PublishError(TransportError):
    """The broker refused a publish; ``reason`` is the MQTT v5 reason string."""

    def __init__(self, message: str, *, topic: str, reason: str, reason_code: int) -> None:
        super().__init__(message)
        self.topic = topic
        self.reason = reason
        self.reason_code = reason_code


class NotAuthorizedError(PublishError):
    """The broker's ACL refused the publish (reason code 0x87)."""


class PacketTooLargeError(PublishError):
    """The message is larger than the broker accepts (reason code 0x95)."""


class QuotaExceededError(PublishError):
    """The broker's quota refused the publish (reason code 0x97)."""


class NoSubscribersError(PublishError):
    """The broker took the message but no subscription matched it (PUBACK 0x10).

    Raised only for publishes that asked for it (``publish_nowait(..., require_subscriber=True)``):
    for most messages (answers, events, cards) nobody listening is no error.
    """

    def __init__(self, topic: str) -> None:
        super().__init__(
            f"nobody subscribes to {topic!r}: the broker answered PUBACK 0x10 (No matching subscribers)",
            topic=topic,
            reason="No matching subscribers",
            reason_code=0x10,
        )


class SubscribeError(TransportError):
    """The broker refused a subscription."""

    def __init__(self, message: str, *, topic_filter: str, reason: str) -> None:
        super().__init__(message)
        self.topic_filter = topic_filter
        self.reason = reason


class PublishTimeoutError(TransportError, TimeoutError):
    """The broker did not acknowledge a QoS 1 publish in time."""


class RequestTimeoutError(TransportError, TimeoutError):
    """No reply arrived for a request before its timeout."""


class CallTimeoutError(RequestTimeoutError):
    """A call to an agent got no answer in time (:mod:`mesh.calls`).

    ``reason`` is ``"idle"`` (nothing for ``waited_s`` seconds) or ``"deadline"`` (the whole
    call took longer than ``waited_s``); ``canceled`` says whether ``tasks/cancel`` was sent
    for ``task_id``.
    """

    def __init__(
        self, *, agent: str, method: str, task_id: str | None, waited_s: float, reason: str, canceled: bool
    ) -> None:
        what = f"no reply or event for {waited_s:g} s" if reason == "idle" else f"no reply within {waited_s:g} s"
        task = f" on task {task_id!r}" if task_id else ""
        outcome = "; the task was canceled" if canceled else ""
        super().__init__(f"{method} to agent {agent!r}: {what}{task}{outcome}")
        self.agent = agent
        self.method = method
        self.task_id = task_id
        self.waited_s = waited_s
        self.reason = reason
        self.canceled = canceled


class ProtocolError(MeshError):
    """A message broke the A2A / JSON-RPC contract."""


class IllegalTransitionError(ProtocolError, ValueError):
    """A task state change that the A2A task state machine does not allow."""

    def __init__(self, current: str, new: str, allowed: frozenset[str]) -> None:
        allowed_text = ", ".join(sorted(allowed)) or "none (terminal state)"
        super().__init__(
            f"illegal task transition {current!r} -> {new!r}; from {current!r} the allowed "
            f"next states are: {allowed_text}"
        )
        self.current = current
        self.new = new


class AgentNotFoundError(MeshError, LookupError):
    """The agent has no card on the mesh; ``available`` names the agents that do."""

    def __init__(self, agent: str, available: list[str], *, waited_s: float, namespace: str) -> None:
        listing = ", ".join(sorted(available)) if available else "none"
        close = difflib.get_close_matches(agent, available, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        super().__init__(
            f"unknown agent {agent!r}: no card in namespace {namespace!r} within {waited_s:g} s{hint} "
            f"(agents on the mesh: {listing})"
        )
        self.agent = agent
        self.available = available


class AgentUnavailableError(MeshError):
    """A call's agent is not there to answer (:mod:`mesh.calls`).

    ``reason`` is ``"not_listening"`` (the broker found no subscriber for the request: the call
    failed at once, ``topic`` is its request topic), ``"gone"`` (the agent's card was removed,
    by its will or its shutdown, while the call waited; or its last replica went) or
    ``"instance_gone"`` (the replica running the call's task went while others of the agent live).
    """

    def __init__(self, message: str, *, agent: str, reason: str, topic: str | None = None) -> None:
        super().__init__(message)
        self.agent = agent
        self.reason = reason
        self.topic = topic

    @classmethod
    def not_listening(cls, agent: str, topic: str) -> AgentUnavailableError:
        return cls(
            f"no agent is listening on {topic!r}: agent {agent!r} is not running (or not under this "
            "name on this namespace); start it, or check the name against `mesh agents`",
            agent=agent,
            reason="not_listening",
            topic=topic,
        )

    @classmethod
    def went_away(cls, agent: str, why: str | None = None) -> AgentUnavailableError:
        why = why or "its card was removed (it shut down, or its connection died and the broker published its will)"
        return cls(f"agent {agent!r} went away: {why} before it answered", agent=agent, reason="gone")

    @classmethod
    def instance_gone(
        cls, agent: str, instance: str, task_id: str | None, *, others_live: bool = False
    ) -> AgentUnavailableError:
        """The replica that owns a task went away. ``others_live``: the agent still has replicas
        (reason ``"instance_gone"``: ask them again; on a shared store one takes the task over);
        else the agent itself is gone (reason ``"gone"``)."""
        task = f"task {task_id!r}" if task_id else "the task"
        if others_live:
            return cls(
                f"replica {instance!r} of agent {agent!r}, which ran {task}, went away while this call waited "
                f"(instance gone; the agent has other live replicas): ask for the task again (tasks/get), "
                "which replicas on a shared store (store: postgresql://...) have taken over, or send it again",
                agent=agent,
                reason="instance_gone",
            )
        return cls(
            f"agent {agent!r} is gone: its replica {instance!r}, which owned {task}, went away and no other "
            f"replica of {agent!r} is live (agent gone); start the agent again, then send the task again",
            agent=agent,
            reason="gone",
        )


class AgentNameTakenError(MeshError):
    """A live instance already serves this agent name on this namespace (:mod:`mesh.discovery.ownership`)."""

    def __init__(self, agent: str, *, namespace: str, broker_url: str) -> None:
        super().__init__(
            f"agent {agent!r} is already running on namespace {namespace!r} at {broker_url} (it answered "
            "on its request topic); stop the other instance, use another name or namespace, or set "
            "`shared_subscription: true` on every instance to run them as replicas"
        )
        self.agent = agent
        self.namespace = namespace
        self.broker_url = broker_url


class TrustError(MeshError):
    """A card signature or a user token did not verify; the message says why."""


class ConfigError(MeshError, ValueError):
    """A configuration file or value is wrong; the message names where and how to fix it."""


class PortUnavailableError(ConfigError, OSError):
    """A server cannot listen on its configured port (taken, or not allowed); the message names
    the address and says to choose another. An ``OSError`` too, as the bind error it reports."""
