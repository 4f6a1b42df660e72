"""The one call path: every request to an agent, and every wait on its answer, goes through here.

:class:`CallPath` belongs to one component (an agent that delegates, a gateway, a client) and
sends its requests; :class:`Call` is one request in flight. ``MeshClient``, the ``Delegator``
and the ``GatewayRuntime`` are built on it and keep only what is their own::

    calls = CallPath(transport, "acme", "orchestrator", role="agent")
    await calls.start()                                       # subscribe to the answer topics
    options = CallOptions(user_id="ada", idle_timeout_s=30)
    async with calls.call("echo", "message/stream", params, options) as call:
        async for answer in call.events():                   # events, then the final answer
            print(answer.value)                               # typed on demand (Answer)
    task = (await calls.request("echo", "message/send", params)).parse(Task)

Topics (DESIGN, topic table). Each call has a *key*, a fresh id that is at once its JSON-RPC
id, its MQTT Correlation Data and the last level of its answer topics:

=========  ==========================================  ======================================
role       replyTo                                     a2aStatusTopic
=========  ==========================================  ======================================
agent      ``.../agent/response/{owner}/{key}``        ``.../agent/status/{owner}/{key}``
gateway    ``.../gateway/response/{owner}/{key}``      ``.../gateway/status/{owner}/{key}``
client     ``.../client/response/{owner}``             ``.../client/status/{owner}/{key}``
=========  ==========================================  ======================================

:meth:`CallPath.start` subscribes once to the owner's two answer families (``.../+`` filters;
the client's response topic has no key level). **Routing rule:** an answer goes to the open call
whose key equals its Correlation Data (agents answer and stream with the request's Correlation
Data). It is the one rule that fits all three roles, since the client response topic carries no
key. What arrives on the response family is the final answer, on the status family an event.
An answer matching no open call (late, or for a call already closed) is dropped.

A call's life:

- :meth:`Call.__aenter__` registers the key, then publishes the JSON-RPC request with the
  options' user properties (:class:`CallOptions`), Correlation Data, content type, payload format
  and a Message Expiry of the call's timeout, without waiting for the PUBACK: a refused publish
  fails the call through :meth:`Call.fail`;
- :meth:`Call.events` yields each answer as an :class:`~mesh.calls.Answer`, the final one
  last; :meth:`Call.result` returns only the final one. Answers are parsed there, once
  (:func:`~mesh.calls.answers.read_answer`): an error answer raises its ``RpcError``, a malformed one
  ``InvalidAgentResponse``;
- the wait is an *idle* timeout, restarted by every answer, and optionally bounded by an overall
  deadline; when it runs out the call sends ``tasks/cancel`` for the remote task (fire and
  forget) and raises :class:`~mesh.errors.CallTimeoutError` naming the agent, the task and the
  wait. The remote task id is the one the request names, else the key (an agent takes the
  request id as the id of a new task), updated from every answer. Only calls that start or
  follow work cancel it: ``message/send``, ``message/stream``, ``tasks/resubscribe``;
- when the coroutine waiting on a call is cancelled, the remote task is canceled the same way
  unless ``cancel_on_abandon=False`` (the gateway keeps tasks of clients that went away, to be
  fetched later). Closing the ``events()`` iterator early cancels nothing;
- leaving the ``async with`` block closes the call.

From outside, :meth:`Call.fail` ends a waiting call with an error (answers already received
are delivered first), and :meth:`CallPath.fail_calls_to` does so for every open call to one
agent. The callee being gone uses them (:class:`~mesh.errors.AgentUnavailableError`):

- a request nobody subscribes to (PUBACK 0x10 "No matching subscribers", which every request
  asks the transport to report) fails its call at once: "no agent is listening on <topic>";
- the removal of the callee's card (its will, or its shutdown) fails every call waiting on it:
  "agent '<name>' went away" (:meth:`CallPath.agent_gone`). Removals come from the component's
  registry (:func:`follow_registry`) or, for a component without one, from a watch on the
  card topic of each agent it calls (:class:`CardWatch`); see :mod:`mesh.calls.gone`.

Modules: :mod:`~mesh.calls.path` (:class:`CallPath`: topics, sending, routing, cancel),
:mod:`~mesh.calls.call` (:class:`Call` and :class:`CallOptions`: one request and its wait),
:mod:`~mesh.calls.answers` (:class:`Answer`: parsing), :mod:`~mesh.calls.gone` (learning
that a callee is gone), :mod:`~mesh.calls.owners` (which replica owns a task) and
:mod:`~mesh.calls.resync` (what a call missed while the broker was away).

The seam between them is public, and no module touches another's private members (a test reads
every module for that): the path sends, sends again and forgets a call (:meth:`CallPath.send`,
:meth:`CallPath.resend`, :meth:`CallPath.close`); the call is told it was sent or forgotten
(:meth:`Call.opened`, :meth:`Call.closed`) and given its answers (:meth:`Call.deliver`), and
shows what the others read (:attr:`Call.state`, :attr:`Call.payload`, :attr:`Call.deadline`,
:attr:`Call.starts_task`, :attr:`Call.failed`).
"""

from mesh.calls.answers import Answer, AnswerValue, parse_model, read_answer
from mesh.calls.call import Call, CallOptions, Params
from mesh.calls.gone import CardWatch, follow_registry
from mesh.calls.path import CallPath, Role

__all__ = [
    "Answer",
    "AnswerValue",
    "Call",
    "CallOptions",
    "CallPath",
    "CardWatch",
    "Params",
    "Role",
    "follow_registry",
    "parse_model",
    "read_answer",
]
