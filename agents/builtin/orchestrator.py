"""orchestrator: asks the agents whose skills match a request, in parallel, and combines the answers.

The candidates are the cards the agent's discovery registry holds when the request arrives
(``ctx.peers()``). Matching is deterministic and explainable; :func:`match_agents` (pure) is
the whole of it:

- The request's *terms* are its lowercase words (letters and digits), minus a few stop words,
  plus each pair of adjacent words joined (``"count down"`` also gives ``"countdown"``).
- A peer's *vocabulary* is its name and the tags, ids and names of its skills, taken the same
  way (each label's words, and the label's words joined: ``"fan-out"`` gives ``fan``, ``out``
  and ``fanout``). Descriptions and examples are left out: their everyday words would match
  almost any request.
- An arithmetic expression in the request (:func:`find_expression`: numbers joined by
  operators, such as ``2+2`` or ``sqrt(9) * 3``) is one more term, which matches a peer whose
  vocabulary has any of :data:`ARITHMETIC_TERMS` (``math``, ``arithmetic``, ``calculator``...).
- A peer's score is the number of request terms it matches. Every peer scoring above zero is
  asked (at most ``max_peers``, the best first; ties by name).
- Never asked: the orchestrator itself, gateways (cards with SAM's gateway-role extension),
  peers named by the ``exclude`` patterns, and skills tagged :data:`OPT_OUT_TAG` (a peer whose
  skills all carry it is never asked; this agent's own card carries it, so that orchestrators
  do not route to each other).
- Routing policy: with ``allow`` (fnmatch patterns of names) and/or ``allow_tags`` (skill
  tags), only peers matching one of them are asked; a card whose name is no valid identifier
  (nor an EMQX profile agent's ``org/unit/agent``) is never asked. With a trust store the
  registry holds only signed cards, so only those are.
  Whatever a peer's card or answer holds, the orchestrator answers: a failure to ask a peer is
  that peer's failed line, never the whole task's.

What a peer is sent: the whole request text, except that a peer matched through the
arithmetic expression gets the expression alone (so ``"echo hi and 2+2"`` sends ``2+2`` to
the calculator and the whole text to echo). Splitting the text further would be guesswork.

The peers' progress is passed on as this task's own events (``forwardedFrom`` metadata). The
reply has one ``agent: answer`` line per peer, failures included (``agent (failed): why``),
and an ``answers`` data artifact with each peer's outcome. Only when every peer failed does
the task fail. When nothing matches, the reply lists the agents there are and their skills.
"""

from __future__ import annotations

import asyncio
import fnmatch
import itertools
import logging
import re
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from agents.agent import Agent
from agents.context import TaskContext
from agents.errors import DelegationError, PeerFailedError
from agents.updates import DataArtifact, Reply, Status, TaskFailed, Update
from mesh.a2a import AgentCard, AgentSkill, DataPart, Message, Task, TextPart, get_text_from_message
from mesh.discovery.registry import GATEWAY_ROLE_EXTENSION
from mesh.profile.requester import is_profile_agent, profile_target
from topics import validate_identifier

__all__ = [
    "ARITHMETIC_TERMS",
    "OPT_OUT_TAG",
    "Match",
    "OrchestratorAgent",
    "RoutingPolicy",
    "find_expression",
    "match_agents",
    "terms",
]

#: A skill tagged with this is never matched; a peer whose skills all carry it is never asked.
OPT_OUT_TAG = "orchestration:opt-out"
#: An arithmetic expression in a request matches a peer with any of these in its vocabulary.
ARITHMETIC_TERMS = frozenset({"math", "maths", "arithmetic", "calculator", "calculate", "compute"})
log = logging.getLogger(__name__)

_STOP_WORDS = frozenset({
    "a", "an", "and", "are", "as", "at", "be", "by", "can", "do", "for", "from", "i", "in", "is", "it",
    "me", "my", "of", "on", "or", "please", "the", "this", "to", "what", "whats", "with", "you", "your",
    "agent", "agents",
})  # fmt: skip
_WORD = re.compile(r"[^\W_]+")
# Tokens of a possible expression; anything else ends it. Names are only function calls
# (followed by "(") and the constants pi and e; other words end an expression too.
_EXPRESSION_TOKEN = re.compile(
    r"\s*(?:(?P<number>(?:\d[\d_]*(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)"
    r"|(?P<function>[A-Za-z]\w*)(?=\()|(?P<constant>(?:pi|e)\b)"
    r"|(?P<operator>\*\*|//|[-+*/^%×÷−])|(?P<open>\()|(?P<close>\))|(?P<comma>,))"
)
_OPERANDS = ("number", "constant")


@dataclass(frozen=True, slots=True)
class Match:
    """A peer to ask: its ``score``, the request terms it ``matched`` and the ``message`` it gets."""

    agent: str
    score: int
    matched: tuple[str, ...]
    message: str


def terms(text: str) -> list[str]:
    """The words of ``text`` (lowercase; no stop words, no numbers), then adjacent pairs joined."""
    words = [w for w in _WORD.findall(text.lower()) if w not in _STOP_WORDS and not w.isdigit()]
    pairs = [a + b for a, b in itertools.pairwise(words)]
    return list(dict.fromkeys([*words, *pairs]))


def find_expression(text: str) -> str | None:
    """The first arithmetic expression in ``text``: two numbers or more joined by operators.

    Words end an expression, except function calls such as ``sqrt(`` and the constants ``pi``
    and ``e``; so do two numbers in a row and any other character (``?``, ``=``, ``:``...).
    """
    for run in _runs(text):
        kinds = [token.lastgroup for token in run]
        while kinds and kinds[-1] in ("operator", "open"):
            kinds.pop()
            run.pop()
        if sum(kind in _OPERANDS for kind in kinds) >= 2 and "operator" in kinds:
            first = run[0]
            return _balanced(text[first.start(first.lastgroup or 0) : run[-1].end()])
    return None


def _runs(text: str) -> Iterator[list[re.Match[str]]]:
    """Maximal runs of expression tokens in ``text``."""
    run: list[re.Match[str]] = []
    pos = depth = 0
    while pos < len(text):
        token = _EXPRESSION_TOKEN.match(text, pos)
        kind = token.lastgroup if token else None
        follows_operand = bool(run) and run[-1].lastgroup in (*_OPERANDS, "close")
        if kind is None or (kind == "comma" and depth == 0) or (kind in _OPERANDS and follows_operand):
            if run:
                yield run
            run, depth = [], 0
        if token is None:  # skip a whole word, or one character
            word = _WORD.match(text, pos)
            pos = word.end() if word else pos + 1
            continue
        pos = token.end()
        if kind == "comma" and depth == 0:
            continue
        run.append(token)
        depth += {"open": 1, "close": -1}.get(kind or "", 0)
    if run:
        yield run


@dataclass(frozen=True, slots=True)
class RoutingPolicy:
    """Which peers may be asked: names matching ``allow`` or skills tagged with ``allow_tags``
    (``None`` for both: any), never names matching ``exclude``."""

    allow: tuple[str, ...] | None = None
    allow_tags: tuple[str, ...] | None = None
    exclude: tuple[str, ...] = ()

    def permits(self, card: AgentCard) -> bool:
        try:
            if is_profile_agent(card.name):  # an EMQX profile agent: org/unit/agent
                profile_target(card.name)
            else:
                validate_identifier(card.name, "agent name")
        except ValueError:
            return False  # no topic to reach it on; the registry refuses such cards anyway
        if any(fnmatch.fnmatchcase(card.name, pattern) for pattern in self.exclude):
            return False
        if self.allow is None and self.allow_tags is None:
            return True
        if any(fnmatch.fnmatchcase(card.name, pattern) for pattern in self.allow or ()):
            return True
        tags = set(self.allow_tags or ())
        return any(tags.intersection(skill.tags) for skill in card.skills)


def match_agents(
    text: str,
    cards: Iterable[AgentCard],
    *,
    exclude: Sequence[str] = (),
    max_peers: int = 8,
    policy: RoutingPolicy | None = None,
) -> list[Match]:
    """The peers to ask about ``text``, best first; ``exclude`` holds fnmatch patterns of names,
    ``policy`` (which includes its own exclusions) says which peers may be asked at all."""
    request = terms(text)
    expression = find_expression(text)
    matches = []
    policy = policy or RoutingPolicy(exclude=tuple(exclude))
    for card, vocabulary in _candidates(cards, policy):
        matched = [term for term in request if term in vocabulary]
        message = text
        if expression is not None and not ARITHMETIC_TERMS.isdisjoint(vocabulary):
            matched.append(expression)
            message = expression
        if matched:
            matches.append(Match(card.name, len(matched), tuple(matched), message))
    matches.sort(key=lambda m: (-m.score, m.agent))
    return matches[:max_peers]


def _candidates(cards: Iterable[AgentCard], policy: RoutingPolicy) -> Iterator[tuple[AgentCard, frozenset[str]]]:
    """The cards that may be asked, each with its vocabulary."""
    for card in cards:
        if policy.permits(card):
            vocabulary = _vocabulary(card)
            if vocabulary is not None:
                yield card, vocabulary


def _vocabulary(card: AgentCard) -> frozenset[str] | None:
    """The terms a peer answers to; None if it must not be asked (a gateway, or opted out)."""
    extensions = card.capabilities.extensions or []
    if any(ext.uri == GATEWAY_ROLE_EXTENSION for ext in extensions):
        return None
    skills = _skills(card)
    if card.skills and not skills:
        return None
    labels = [card.name, *(label for s in skills for label in (s.id, s.name, *s.tags))]
    vocabulary: set[str] = set()
    for label in labels:
        words = _WORD.findall(label.lower())
        vocabulary.update(words)
        vocabulary.add("".join(words))
    return frozenset(term for term in vocabulary if term and term not in _STOP_WORDS and not term.isdigit())


def _skills(card: AgentCard) -> list[AgentSkill]:
    return [s for s in card.skills if OPT_OUT_TAG not in s.tags]


def _balanced(expression: str) -> str:
    """Drop parentheses left open or closed at the edges: ``"2+2)"`` -> ``"2+2"``."""
    while expression.endswith(")") and expression.count(")") > expression.count("("):
        expression = expression[:-1].rstrip()
    while expression.startswith("(") and expression.count("(") > expression.count(")"):
        expression = expression[1:].lstrip()
    return expression


# --- the agent ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Outcome:
    """What one peer answered, or why it did not."""

    match: Match
    task: Task | None = None
    error: DelegationError | None = None

    @property
    def ok(self) -> bool:
        return self.task is not None

    @property
    def final_task(self) -> Task | None:
        """The peer's final Task, when it ended at all (a failed one included)."""
        if self.task is not None:
            return self.task
        return self.error.task if isinstance(self.error, PeerFailedError) else None

    def text(self) -> str:
        """The peer's answer, or its own account of the failure, or the delegation error."""
        task = self.final_task
        if self.ok and task is not None:
            return _answer_text(task) or "(no answer)"
        if task is not None and task.status.message is not None:
            return get_text_from_message(task.status.message) or str(self.error)
        return str(self.error)

    def line(self) -> str:
        label = self.match.agent if self.ok else f"{self.match.agent} (failed)"
        return f"{label}: " + self.text().replace("\n", "\n  ")

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"ok": self.ok, "sent": self.match.message, "matched": list(self.match.matched)}
        task = self.final_task
        if task is not None:
            out.update(state=task.status.state.value, taskId=task.id)
        out["text" if self.ok else "error"] = self.text()
        data = _answer_data(task) if self.ok and task is not None else None
        if data is not None:
            out["data"] = data
        return out


class OrchestratorAgent(Agent):
    """Routes a request to the agents on the mesh whose skills match it (see the module docstring).

    Options: ``exclude`` (fnmatch patterns of agents never to ask), ``allow`` (fnmatch patterns
    of the only agents it may ask), ``allow_tags`` (or agents with a skill tagged so),
    ``max_peers`` (ask at most this many) and ``timeout_s`` (each peer's idle timeout; default
    the delegation settings').
    """

    name = "orchestrator"
    uses_discovery = True  # matches requests against ctx.peers()
    description = (
        "Routes a request to the agents whose skills match it, asks them in parallel, and combines "
        "their answers with attribution. Name agents or skills (echo, countdown, math...) or include "
        "an arithmetic expression."
    )
    skills = (
        AgentSkill(
            id="orchestrate",
            name="Route and combine",
            description="Picks agents by their skills' tags and names, fans the request out to them in "
            "parallel, streams their progress and answers with one attributed line per agent",
            tags=["route", "orchestrate", "fan-out", "delegate", OPT_OUT_TAG],
            examples=["what is 2+2", "echo hello and 6*7", "countdown from 3 and echo liftoff"],
        ),
    )

    def __init__(
        self,
        *,
        exclude: Sequence[str] = (),
        allow: Sequence[str] | None = None,
        allow_tags: Sequence[str] | None = None,
        max_peers: int = 8,
        timeout_s: float | None = None,
        **options: Any,
    ) -> None:
        super().__init__(**options)
        if max_peers < 1:
            raise ValueError(f"max_peers must be at least 1, got {max_peers}")
        for option, value in (("exclude", exclude), ("allow", allow), ("allow_tags", allow_tags)):
            if isinstance(value, str) or not all(isinstance(item, str) for item in value or ()):
                raise ValueError(f"{option} must be a list of strings, got {value!r}")
        self.exclude = tuple(exclude)
        self.policy = RoutingPolicy(
            allow=tuple(allow) if allow is not None else None,
            allow_tags=tuple(allow_tags) if allow_tags is not None else None,
            exclude=self.exclude,
        )
        self.max_peers = max_peers
        self.timeout_s = timeout_s

    async def handle(self, message: Message, ctx: TaskContext) -> AsyncIterator[Update]:
        text = get_text_from_message(message)
        peers = [card for card in ctx.peers() if card.name != self.name]
        plan = match_agents(text, peers, max_peers=self.max_peers, policy=self.policy)
        if not plan:
            catalogue = _catalogue(peers, self.policy)
            yield Reply(_no_match(text, catalogue), data={"matched": [], "available": catalogue})
            return
        yield Status(
            f"asking {', '.join(m.agent for m in plan)}",
            data={"plan": {m.agent: {"sent": m.message, "matched": list(m.matched)} for m in plan}},
        )
        outcomes = await asyncio.gather(*(self._ask(ctx, m) for m in plan))
        yield DataArtifact("answers", {o.match.agent: o.to_json() for o in outcomes})
        combined = "\n".join(o.line() for o in outcomes)
        if not any(o.ok for o in outcomes):
            raise TaskFailed(f"every agent asked failed:\n{combined}")
        yield Reply(combined)

    async def _ask(self, ctx: TaskContext, match: Match) -> _Outcome:
        try:
            task = await ctx.delegate(match.agent, match.message, forward=True, timeout=self.timeout_s)
        except DelegationError as exc:
            return _Outcome(match, error=exc)
        except Exception as exc:  # whatever a peer's card or answer holds, the other peers' answers still count
            log.warning("%s: asking %r failed: %s: %s", self.name, match.agent, type(exc).__name__, exc)
            return _Outcome(match, error=DelegationError(f"{type(exc).__name__}: {exc}", peer=match.agent))
        return _Outcome(match, task=task)


def _answer_text(task: Task) -> str:
    """The text of a peer's final message, else of its text artifacts."""
    if task.status.message is not None:
        text = get_text_from_message(task.status.message)
        if text:
            return text
    parts = [p for a in task.artifacts or [] for p in a.parts if isinstance(p, TextPart)]
    return "".join(p.text for p in parts).strip()


def _answer_data(task: Task) -> dict[str, Any] | None:
    message = task.status.message
    data = [p.data for p in message.parts if isinstance(p, DataPart)] if message is not None else []
    return data[0] if data else None


def _catalogue(peers: Iterable[AgentCard], policy: RoutingPolicy) -> dict[str, dict[str, Any]]:
    """The agents that could be asked: their descriptions and their skills' names and tags."""
    return {
        card.name: {
            "description": card.description,
            "skills": [{"id": s.id, "name": s.name, "tags": list(s.tags)} for s in _skills(card)],
        }
        for card, _ in _candidates(peers, policy)
    }


def _no_match(text: str, catalogue: dict[str, dict[str, Any]]) -> str:
    if not catalogue:
        return f"No agent matches {text!r}: there are no other agents on the mesh right now."
    lines = [f"No agent matches {text!r}. Name an agent or use words from its skills. Available agents:"]
    for name, entry in catalogue.items():
        skills = "; ".join(f"{s['name']} [{', '.join(s['tags'])}]" for s in entry["skills"])
        lines.append(f"- {name}: {entry['description']}" + (f" Skills: {skills}" if skills else ""))
    return "\n".join(lines)
