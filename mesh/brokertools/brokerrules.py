"""Least privilege on the broker: what each component may read and publish (DESIGN, "Trust").

A component's broker username is its name (an agent's name, a gateway's id, a client's name);
:func:`rules_for` lists what that user may do, as topic filters in the broker's terms:

- **read** (subscribe and receive): an agent its request topic (also as ``$share/<agent>/...``,
  for replicas), its instance topics and its own answer topics; a gateway and a client their own
  answer topics; everyone the discovery tree of the namespace and its roll calls.
- **publish**: an agent its own card(s), answers in the six answer families
  (:data:`topics.ANSWER_TEMPLATES`) and requests to agents; a gateway its own card and requests;
  a client requests only; everyone a roll call (on today's topic and the previous release's).

Everything else is denied: other components' requests and answers, ``#``, ``$SYS``, other
namespaces, cards in another's name, the SAM heartbeat topic (whose cards registries accept by
the name inside) and topics outside the mesh. The rules are data; :mod:`mesh.brokertools.dynsec`
turns them into the broker's file.

**Client ids** (:mod:`mesh.clientids`). Every user may connect under one client id only,
:func:`bound_users`, derived from its password (:func:`mesh.clientids.own_client_id`), so a
component holding its own credentials is refused (CONNACK) when it tries another's id: the
broker, not a secret, stops a takeover. A component's other connections have users of their own
(same password and rights): an agent's name check ``{name}@probe``, a gateway's dashboard
watcher and sender ``{name}@watch`` and ``{name}@ui``, and slots ``{name}@1`` ... for the CLI
user (many commands at once) and for an agent run as replicas: each running replica holds one,
a free one of its machine or the one ``$MESH_REPLICA_SLOT`` names (replicas on several machines
or containers, :func:`mesh.clientids.replica_connection`). Unbound: a name used in several
namespaces, and a client declared ``unbound`` (a third-party SDK that picks its own client ids).

**A gateway's dashboard watcher** (``{gateway}@watch``) has rights of its own: an operator's view
of its namespace, read-only (:func:`watch_rules`): the discovery tree, each agent's request topic
(subscribed per agent while its card is there, never with a wildcard) and the six answer
families. It publishes nothing but a roll call. The page behind it is the gateway's, behind the
gateway's authentication (docs/security-model.md).

**The doctor** (kind ``probe``, ``mesh doctor``) may read and publish only under
:data:`PROBE_ROOT` (``mesh-doctor/#``, shared subscriptions there included), a scratch tree no
component uses: its checks (retained messages, wills, sessions, ``$share``) run there, each in a
slot of its own (it opens several connections at once, and a child process that dies).

The EMQX profile (``$a2a/v1/...``; a ``#`` or ``+`` grant never matches a ``$`` topic, so each
is named): every component may read the profile's cards (``$a2a/v1/discovery/+/+/+``), call
profile agents (publish ``$a2a/v1/request/...``) and read its own replies
(``$a2a/v1/reply/+/+/{name}/+``). An agent that serves the profile (``Identity.profile``) has a
second broker user for its profile connection, :func:`profile_user` (``{name}@a2a``), bound to
the profile's client id ``{org}/{unit}/{agent}``: it reads its request topic, its own card (to
heal it) and its pool, publishes its card (and will), replies in ``$a2a/v1/reply/...`` and
events on its own event topic. An agent run as replicas has slots there too, like its own user:
the replica in slot ``k`` is the profile's agent ``{agent}-{k}`` (:func:`profile_member_id`),
as user ``{name}@a2a@{k}`` (slot 0: ``{name}@a2a``) bound to the client id
``{org}/{unit}/{agent}-{k}``, with that member's topics and the pool's alone: no replica reads
another agent's requests or writes another agent's card. A pool member's probe of ``$share``
(``agents.profile``) reads, through a shared subscription only, its own reply topic
``$a2a/v1/reply/{org}/{unit}/{agent}/a2a-pool-probe``.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from mesh.clientids import CLIENT_SLOTS, SLOTS, own_client_id, role_client_id, role_user, slot_user
from mesh.config.credentials import PROBE_ROLE, probe_client_id
from topics import (
    AGENT_REQUEST_TOPIC,
    ANSWER_TEMPLATES,
    PROFILE_PREFIX,
    PROFILE_PROBE_SUFFIX,
    get_agent_discovery_topic,
    get_agent_request_topic,
    get_agent_response_subscription_topic,
    get_agent_status_subscription_topic,
    get_client_response_topic,
    get_client_status_subscription_topic,
    get_discovery_rollcall_topic,
    get_discovery_subscription_topic,
    get_gateway_discovery_topic,
    get_gateway_response_subscription_topic,
    get_gateway_status_subscription_topic,
    get_rollcall_topic,
    profile_client_id,
    profile_discovery_filter,
    profile_discovery_topic,
    profile_pool_subscription,
    profile_pool_topic,
    profile_request_topic,
    shared_subscription,
    validate_identifier,
    validate_namespace,
)

__all__ = [
    "GATEWAY_ROLES",
    "PROBE_ROOT",
    "PROBE_SLOTS",
    "BoundUser",
    "Identity",
    "Kind",
    "ProfileScope",
    "Rules",
    "bound_users",
    "probe_user",
    "profile_agent_ids",
    "profile_member_id",
    "profile_rules",
    "profile_user",
    "rules_by_user",
    "rules_for",
    "slot_counts",
    "watch_rules",
]

Kind = Literal["agent", "gateway", "client", "probe"]

#: The scratch tree of ``mesh doctor``'s checks: the only topics a probe user may use.
PROBE_ROOT = "mesh-doctor"
#: Connections at once of a probe user: a diagnosis holds up to ~9 (more with --peer).
PROBE_SLOTS = 32


@dataclass(frozen=True, slots=True)
class ProfileScope:
    """Where an agent serves the EMQX profile: its org, unit, agent id and pool (replicas: any member id)."""

    org: str
    unit: str
    agent_id: str
    pool: str | None = None
    replica: bool = False


@dataclass(frozen=True, slots=True)
class Identity:
    """A component as the broker knows it: its kind, its name (= username) and its namespace."""

    kind: Kind
    name: str
    namespace: str
    #: Set for an agent that also serves the EMQX profile (its second broker user).
    profile: ProfileScope | None = None
    #: An agent run as replicas (``shared_subscription``): each start has a new instance id.
    replica: bool = False
    #: A client that picks its own client ids (the EMQX profile's SDK, ``{org}/{unit}/{id}-{session}``):
    #: left unbound, it may connect under any id, hence take over a session whose id it knows
    #: (the mesh's are keyed by their passwords). Only for clients outside the mesh's code.
    unbound: bool = False

    def __post_init__(self) -> None:
        validate_identifier(self.name, f"{self.kind} name")
        validate_namespace(self.namespace)


@dataclass(slots=True)
class Rules:
    """What one broker user may do: filters it may subscribe to (and receive from), and publish to."""

    kind: Kind
    read: list[str] = field(default_factory=list)
    publish: list[str] = field(default_factory=list)
    #: The only client id the user may connect with (``None``: any).
    client_id: str | None = None

    def add(self, other: Rules) -> None:
        self.read += [f for f in other.read if f not in self.read]
        self.publish += [f for f in other.publish if f not in self.publish]


def probe_user(name: str) -> str:
    """The second broker user of a bound agent, for its name check (same password, same rights)."""
    return role_user(validate_identifier(name, "agent name"), PROBE_ROLE)


#: A gateway's connections besides its own: its dashboard's watcher and its sender.
GATEWAY_ROLES = ("watch", "ui")


@dataclass(frozen=True, slots=True)
class BoundUser:
    """A broker user bound to one client id: a component's own user, or one of its other users."""

    #: The component's username: its rules and its password.
    owner: str
    client_id: str
    #: What the connection is, for the broker's ``textName`` ("" for the component's own).
    role: str = ""
    #: Rights of its own (a role of its own on the broker); None: its component's.
    rules: Rules | None = None


def bound_users(identities: Iterable[Identity], passwords: Mapping[str, str]) -> dict[str, BoundUser]:
    """Every user bound to one client id, by username: each component's own user and its role
    and slot users, the CLI's and each replicated agent's (see the module doc)."""
    identities = list(identities)
    namespaces = Counter(identity.name for identity in identities if identity.kind != "client")
    bound: dict[str, BoundUser] = {}
    for identity in identities:
        bound.update(_profile_slots(identity, passwords))
        name, password = identity.name, passwords.get(identity.name)
        if not password or name in bound or (identity.kind != "client" and namespaces[name] != 1):
            continue
        if identity.unbound:
            continue
        own = own_client_id(identity.kind, identity.namespace, name, password)
        bound[name] = BoundUser(name, own)
        if identity.kind == "agent" and not identity.replica:
            bound[probe_user(name)] = BoundUser(name, probe_client_id(own), "name check")
        if identity.kind == "gateway":
            bound.update({role_user(name, r): BoundUser(name, role_client_id(own, r), r) for r in GATEWAY_ROLES})
            watcher = bound[role_user(name, "watch")]
            bound[role_user(name, "watch")] = dataclasses.replace(watcher, rules=watch_rules(identity.namespace))
        if identity.kind in ("client", "probe") or identity.replica:
            slots = {"client": CLIENT_SLOTS, "probe": PROBE_SLOTS}.get(identity.kind, SLOTS)
            for slot in range(1, slots):
                bound[slot_user(name, slot)] = BoundUser(name, role_client_id(own, str(slot)), f"slot {slot}")
    return bound


def slot_counts(bound: Mapping[str, BoundUser]) -> dict[str, int]:
    """The users with slots among ``bound`` and how many (``<credentials>/<name>.slots``)."""
    counts: dict[str, int] = {}
    for user in bound.values():
        if user.role.startswith("slot "):
            counts[user.owner] = counts.get(user.owner, 1) + 1
    return counts


def profile_user(name: str) -> str:
    """The broker user of an agent's profile connection: ``{name}@a2a`` (no mesh name has an ``@``)."""
    return f"{validate_identifier(name, 'agent name')}@a2a"


def _profile_calls(name: str) -> Rules:
    """What every component may do in the profile as a caller: read cards, request, read its replies."""
    return Rules(
        "client",
        read=[profile_discovery_filter(), f"{PROFILE_PREFIX}/reply/+/+/{name}/+"],
        publish=[f"{PROFILE_PREFIX}/request/+/+/+", f"{PROFILE_PREFIX}/request/+/+/pool/+"],
    )


def profile_member_id(agent_id: str, slot: int) -> str:
    """The profile's agent id of the replica of ``agent_id`` in slot ``slot``: ``{agent_id}-{slot}``."""
    return f"{validate_identifier(agent_id, 'agent id')}-{slot}"


def profile_agent_ids(scope: ProfileScope) -> list[str]:
    """The profile's agent ids a scope's connections may take: its agent id, or its replicas' (one per slot)."""
    if not scope.replica:
        return [scope.agent_id]
    return [profile_member_id(scope.agent_id, slot) for slot in range(SLOTS)]


def profile_rules(scope: ProfileScope, slot: int = 0) -> Rules:
    """The rules of an agent's profile connection (:func:`profile_user`); a replica's: those of
    its slot's member id (:func:`profile_member_id`), whose user is ``slot_user(profile_user(name), slot)``."""
    org, unit = scope.org, scope.unit
    agent = profile_member_id(scope.agent_id, slot) if scope.replica else scope.agent_id
    card = profile_discovery_topic(org, unit, agent)  # validates the ids
    event = f"{PROFILE_PREFIX}/event/{org}/{unit}/{agent}"
    # The pool probe's subscription: a shared one on a reply topic of the member's own id with the
    # probe's fixed suffix, never others' replies.
    probe = f"{PROFILE_PREFIX}/reply/{org}/{unit}/{agent}/{PROFILE_PROBE_SUFFIX}"
    # Its requests, its own card (watched: it heals, agents.profile), the pool probe's subscription.
    read = [profile_request_topic(org, unit, agent), card, f"$share/+/{probe}"]
    if scope.pool is not None:
        read += [profile_pool_subscription(org, unit, scope.pool), profile_pool_topic(org, unit, scope.pool)]
    return Rules(
        "agent",
        read=read,
        publish=[card, f"{PROFILE_PREFIX}/reply/+/+/+/#", event],
        client_id=profile_client_id(org, unit, agent),
    )


def _profile_slots(identity: Identity, passwords: Mapping[str, str]) -> dict[str, BoundUser]:
    """The slot users of a replicated agent's profile connection: ``{name}@a2a@{k}``, each bound
    to its member id's client id, with the rights of that member alone (slot 0 is ``{name}@a2a``)."""
    scope, user = identity.profile, profile_user(identity.name)
    if identity.kind != "agent" or scope is None or not scope.replica or not passwords.get(user):
        return {}
    slots: dict[str, BoundUser] = {}
    for slot in range(1, SLOTS):
        client_id = profile_client_id(scope.org, scope.unit, profile_member_id(scope.agent_id, slot))
        slots[slot_user(user, slot)] = BoundUser(user, client_id, f"slot {slot}", profile_rules(scope, slot))
    return slots


def rules_for(identity: Identity) -> Rules:
    """The least-privilege rules of one component on its namespace (and as a caller in the EMQX profile)."""
    rules = _sam_rules(identity)
    if identity.kind == "probe":
        return rules
    rules.add(_profile_calls(identity.name))
    return rules


def watch_rules(namespace: str) -> Rules:
    """A dashboard watcher's rights on ``namespace``: read cards, requests and answers; publish a roll call."""
    return Rules(
        "gateway",
        read=[
            get_discovery_subscription_topic(namespace),
            profile_discovery_filter(),
            AGENT_REQUEST_TOPIC.filter(namespace=namespace),  # subscribed one agent at a time
            *(template.filter(namespace=namespace) for template in ANSWER_TEMPLATES),
            get_rollcall_topic(namespace),
        ],
        publish=_rollcalls(namespace),
    )


def _rollcalls(namespace: str) -> list[str]:
    """Where a registry may call the roll: today's topic, and the previous release's (its
    components, running beside these rules, still call there; mesh.discovery.rollcall)."""
    return [get_rollcall_topic(namespace), get_discovery_rollcall_topic(namespace)]


def _probe_rules() -> Rules:
    """``mesh doctor``'s rights: its scratch tree only (:data:`PROBE_ROOT`)."""
    return Rules("probe", read=[f"{PROBE_ROOT}/#", f"$share/+/{PROBE_ROOT}/#"], publish=[f"{PROBE_ROOT}/#"])


def _sam_rules(identity: Identity) -> Rules:
    ns, name = identity.namespace, identity.name
    if identity.kind == "probe":
        return _probe_rules()
    requests = [AGENT_REQUEST_TOPIC.filter(namespace=ns), AGENT_REQUEST_TOPIC.filter(namespace=ns) + "/+"]
    # Every component reads the cards and the roll calls (the old roll-call topic lies in the
    # discovery tree); every registry may call the roll.
    discovery, heard = get_discovery_subscription_topic(ns), get_rollcall_topic(ns)
    rollcalls = _rollcalls(ns)
    if identity.kind == "agent":
        own_requests = get_agent_request_topic(ns, name)
        card = get_agent_discovery_topic(ns, name)
        return Rules(
            "agent",
            read=[
                own_requests,
                shared_subscription(name, own_requests),  # replicas share the requests
                own_requests + "/+",  # a replica's instance topic (follow-ups to its tasks)
                get_agent_response_subscription_topic(ns, name),  # delegation answers, the name probe
                get_agent_status_subscription_topic(ns, name),
                discovery,
                heard,
            ],
            # Its card, each replica's instance card, answers where a request asks, requests.
            publish=[card, card + "/+", *(t.filter(namespace=ns) for t in ANSWER_TEMPLATES), *requests, *rollcalls],
        )
    if identity.kind == "gateway":
        return Rules(
            "gateway",
            read=[
                get_gateway_response_subscription_topic(ns, name),
                get_gateway_status_subscription_topic(ns, name),
                discovery,
                heard,
            ],
            publish=[get_gateway_discovery_topic(ns, name), *requests, *rollcalls],
        )
    return Rules(
        "client",
        read=[get_client_response_topic(ns, name), get_client_status_subscription_topic(ns, name), discovery, heard],
        publish=[*requests, *rollcalls],
    )


def rules_by_user(identities: Iterable[Identity]) -> dict[str, Rules]:
    """The rules of every username; one name in several namespaces gets the union.

    One name of two kinds (an agent and a gateway both called ``http``) is refused: both would
    connect as one broker user, each with the other's rights.
    """
    users: dict[str, Rules] = {}
    profile_ids: dict[tuple[str, str, str], str] = {}
    for identity in identities:
        if identity.kind == "agent" and identity.profile is not None:
            scope = identity.profile
            users[profile_user(identity.name)] = profile_rules(scope)
            for agent_id in profile_agent_ids(scope):
                holder = profile_ids.setdefault((scope.org, scope.unit, agent_id), identity.name)
                if holder != identity.name:
                    raise ValueError(
                        f"agents {holder!r} and {identity.name!r} would both be {scope.org}/{scope.unit}/{agent_id} "
                        "in the EMQX profile (replicas are {agent_id}-{slot}); give one of them another emqx.agent_id"
                    )
        rules = rules_for(identity)
        known = users.get(identity.name)
        if known is None:
            users[identity.name] = rules
        elif known.kind != identity.kind:
            raise ValueError(
                f"{known.kind} {identity.name!r} and {identity.kind} {identity.name!r} would share the broker "
                "username; rename one of them"
            )
        else:
            known.add(rules)
    return users
