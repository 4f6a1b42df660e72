"""What an agent checks of who and what sent a request, before any method runs.

- ``callDepth`` must be an integer from 0 to ``delegation.max_call_depth``: a negative depth
  would get around the maximum.
- ``a2aCallChain`` must be a JSON list of at most ``max_call_depth`` agent names (identifiers),
  and must not already hold this agent unless ``delegation.allow_cycles``.
- ``authToken``: with trusted issuers (``trust.token_issuers``) the token is verified and the
  request's :class:`~mesh.trust.Identity` is verified or not; with ``require_user_token``
  a request without a valid token is refused (``Unauthenticated``, -32020).
- ``a2aCallerToken``: with trusted keys the component that sent the request is what its caller
  token proves (:mod:`mesh.trust.callers`), else nobody; without keys, the component whose
  answer topic the request names (a claim the broker rules do not check: agents.owners).

Refusals are JSON-RPC errors naming the property (``data.property``) and the fix.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agents.owners import caller_of
from agents.settings import AgentSettings
from mesh.a2a import InvalidRequest, Unauthenticated
from mesh.errors import ConfigError, short_repr
from mesh.properties import CALL_CHAIN, CALL_DEPTH, MessageProperties
from mesh.trust import Identity
from topics import validate_identifier

if TYPE_CHECKING:
    from mesh.trust import TokenVerifier, Trust
    from mesh.trust.callers import CallerVerifier

__all__ = ["CallGuard"]


class CallGuard:
    """Checks the call properties and the user token of one agent's requests."""

    def __init__(
        self,
        agent_name: str,
        settings: AgentSettings,
        tokens: TokenVerifier | None = None,
        callers: CallerVerifier | None = None,
    ) -> None:
        self.agent_name = agent_name
        self.settings = settings
        self.tokens = tokens
        self.callers = callers
        self.require_token = settings.require_user_token

    @classmethod
    def for_agent(cls, name: str, namespace: str, settings: AgentSettings, trust: Trust | None) -> CallGuard:
        """The guard of agent ``name``: user tokens of its trusted issuers, callers proven by their keys."""
        tokens = trust.token_verifier(namespace) if trust is not None else None
        if settings.require_user_token and tokens is None:
            raise ConfigError(
                f"agent {name!r} has require_user_token but no trusted token issuer; set trust.keys (or "
                "trust.jwks) and trust.token_issuers to the gateways whose tokens it accepts"
            )
        callers = trust.caller_verifier(namespace, name) if trust is not None else None
        return cls(name, settings, tokens, callers)

    def __call__(self, props: MessageProperties) -> Identity:
        """The request's identity once its call properties pass; a JSON-RPC error otherwise."""
        self.check_call_chain(props)
        return self.identify(props)

    def identify(self, props: MessageProperties) -> Identity:
        if self.tokens is None:
            identity = Identity(props.user_id, problem="the agent trusts no token issuer (trust.token_issuers)")
        else:
            identity = self.tokens.identify(props.user_id, props.auth_token)
        if self.require_token and not identity.verified:
            raise Unauthenticated(
                f"agent {self.agent_name!r} requires a valid user token (require_user_token): {identity.problem}; "
                "send the request through a gateway the agent trusts",
                data={"property": "authToken", "reason": identity.problem},
            )
        return identity

    def caller(self, props: MessageProperties, reply_topic: str | None, namespace: str) -> str | None:
        """``kind:name`` of the component that sent the request: proven by its caller token when the
        agent has trusted keys (none proven: None), else claimed by the answer topic it names."""
        if self.callers is not None:
            return self.callers.caller(props.caller_token)
        return caller_of(reply_topic, namespace)

    def check_call_chain(self, props: MessageProperties) -> None:
        """Refuse a malformed, too deep or cyclic call (whoever sent it)."""
        delegation = self.settings.delegation
        if props.call_depth is None and (raw := props.get_extra(CALL_DEPTH)) is not None:
            raise _bad(CALL_DEPTH, f"callDepth {short_repr(raw)} is not an integer")
        depth = props.call_depth or 0
        if depth < 0:
            raise _bad(CALL_DEPTH, f"callDepth {depth} is negative; a call starts at 0")
        if depth > delegation.max_call_depth:
            raise InvalidRequest(
                f"call depth {depth} exceeds agent {self.agent_name!r}'s maximum of {delegation.max_call_depth} "
                "(delegation.max_call_depth)",
                data={"property": CALL_DEPTH, "callDepth": depth, "maxCallDepth": delegation.max_call_depth},
            )
        if props.call_chain is None:
            if (raw := props.get_extra(CALL_CHAIN)) is not None:
                raise _bad(CALL_CHAIN, f"a2aCallChain {short_repr(raw)} is not a JSON list of agent names")
            return
        chain = props.call_chain
        if len(chain) > delegation.max_call_depth:
            raise _bad(
                CALL_CHAIN,
                f"a2aCallChain lists {len(chain)} agents; agent {self.agent_name!r} accepts at most "
                f"{delegation.max_call_depth} (delegation.max_call_depth)",
            )
        for name in chain:
            try:
                validate_identifier(name, "agent name")
            except ValueError:
                raise _bad(CALL_CHAIN, f"a2aCallChain holds {short_repr(name)}, which is no agent name") from None
        if self.agent_name in chain and not delegation.allow_cycles:
            raise InvalidRequest(
                f"the call chain {' -> '.join([*chain, self.agent_name])} is a cycle; agent {self.agent_name!r} "
                "refuses it (delegation.allow_cycles is false)",
                data={"property": CALL_CHAIN, "callChain": chain},
            )


def _bad(prop: str, problem: str) -> InvalidRequest:
    return InvalidRequest(f"{problem}; send a valid {prop} or leave it out", data={"property": prop})
