"""The hold at the concurrency bound (agents.admission), driven directly: pause, release, expiry."""

from __future__ import annotations

import asyncio

from agents.admission import SWEEP_INTERVAL_S, Admission
from mesh.a2a import AgentBusy
from mesh.properties import MessageProperties
from mesh.transport import InboundMessage


class Agent:
    """What the admission sees of an agent: places, and what it did with each request."""

    def __init__(self, places: int) -> None:
        self.places = places
        self.ran: list[bytes] = []
        self.refused: list[tuple[bytes, AgentBusy]] = []
        self.acked: list[bytes] = []
        self.paused: list[str] = []
        self.refusal = asyncio.Event()

    def dispatch(self, message: InboundMessage) -> bool:
        if self.places == 0:
            return True  # still at capacity: deferred
        self.places -= 1
        self.ran.append(message.payload)
        return False

    def refuse(self, message: InboundMessage, error: AgentBusy) -> None:
        self.refused.append((message.payload, error))
        self.refusal.set()

    def admission(self, receive_maximum: int) -> Admission:
        return Admission(
            "worker",
            max_concurrent=1,
            receive_maximum=receive_maximum,
            dispatch=self.dispatch,
            refuse=self.refuse,
            acknowledge=lambda message: self.acked.append(message.payload),
            at_capacity=lambda: self.places == 0,
            pause=self.paused.append,
            resume=lambda reason: self.paused.remove(reason),
        )


def request(n: int, expiry_s: int | None = None, qos: int = 1) -> InboundMessage:
    props = MessageProperties(message_expiry_s=expiry_s)
    return InboundMessage(topic="t", payload=str(n).encode(), qos=qos, retain=False, properties=props)


async def test_reading_pauses_at_the_bound_and_resumes_as_places_free() -> None:
    agent = Agent(places=0)
    admission = agent.admission(receive_maximum=2)
    admission.hold(request(1))
    assert agent.paused == []
    admission.hold(request(2))
    assert agent.paused == ["at max_concurrent_tasks"]
    agent.places = 1
    admission.release()
    assert agent.ran == [b"1"] and agent.acked == [b"1"]  # the oldest first, acknowledged once run
    assert agent.paused == [] and admission.held == 1
    admission.close()


async def test_a_request_whose_expiry_runs_out_while_held_is_answered_busy() -> None:
    agent = Agent(places=0)
    admission = agent.admission(receive_maximum=8)
    admission.hold(request(1, expiry_s=1))
    admission.hold(request(2))  # no expiry: it waits as long as it takes
    await asyncio.wait_for(agent.refusal.wait(), 1 + 4 * SWEEP_INTERVAL_S)
    [(payload, error)] = agent.refused
    assert payload == b"1" and "Message Expiry" in error.error.message
    assert agent.acked == [b"1"] and admission.held == 1
    admission.close()


async def test_past_twice_the_bound_a_request_is_answered_busy() -> None:
    agent = Agent(places=0)
    admission = agent.admission(receive_maximum=1)
    admission.hold(request(1))
    admission.hold(request(2))
    admission.hold(request(3))
    assert [payload for payload, _ in agent.refused] == [b"3"] and admission.held == 2
    admission.close()


async def test_a_resumed_session_drops_the_held_copies_the_broker_redelivers() -> None:
    agent = Agent(places=0)
    admission = agent.admission(receive_maximum=2)
    admission.hold(request(1))
    admission.hold(request(2, qos=0))
    assert agent.paused == ["at max_concurrent_tasks"]
    assert admission.forget_redelivered() == 1
    assert admission.held == 1 and agent.paused == []  # QoS 0 is never redelivered: kept
    admission.close()
