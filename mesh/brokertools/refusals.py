"""What to do when the broker refuses a command: its connection, a subscription or a publish.

The transport marks a refusal with the broker and the broker user it refused
(:meth:`mesh.errors.TransportError.refused_as`); its message already names the topic and the
reason. What it cannot know is the way out, which depends on this machine: whether a ``mesh
up`` runs here with that broker (then the credentials used were not the command's own), runs
here with another broker (then ``--broker`` or ``$MESH_BROKER_URL`` points elsewhere), or does
not run under this state dir at all (another HOME or ``MESH_STATE_DIR``, or a broker ``mesh up``
did not start, whose users come from ``mesh broker-config``). A refusal is never answered with
"start the broker": the broker answered.
"""

from __future__ import annotations

import os
from pathlib import Path

from mesh.brokertools.upstate import running_up_of_broker, running_ups
from mesh.config.statedir import STATE_DIR_ENV, default_state_dir
from mesh.errors import ConnectError, NotAuthorizedError, SubscribeError, TransportError

__all__ = ["refusal_fix"]

#: CONNACK reasons of a refused identity: bad user name or password, not authorized.
_REFUSED_IDENTITY = (0x86, 0x87)


def refusal_fix(exc: BaseException, state_dir: Path | None = None) -> str | None:
    """How to get past the broker's refusal ``exc`` (None: ``exc`` is no refusal of an identity)."""
    if not isinstance(exc, TransportError) or exc.broker_url is None or not _authorization(exc):
        return None
    url, user = exc.broker_url, exc.broker_user
    state = state_dir or default_state_dir()
    record = running_up_of_broker(url, None, state)
    who = f"broker user {user!r}" if user else "a client without credentials"
    if record is not None:
        return (
            f"the mesh up running here (pid {record.pid}) started this broker, and its rules do not let {who} do "
            "this: the command used credentials that are not its own (leave out --client, a user in --broker and "
            "MESH_BROKER_PASSWORD_FILE, so it gets its own from mesh up), or that mesh up is of an older version "
            "(restart it)"
        )
    elsewhere = sorted({r.broker_url for r in running_ups(state) if r.broker_url})
    if elsewhere:
        return (
            f"the mesh up running here uses the broker {', '.join(elsewhere)}, not {url}: leave out --broker and "
            "$MESH_BROKER_URL to use it"
        )
    where = f"${STATE_DIR_ENV}={state}" if os.environ.get(STATE_DIR_ENV) else f"the state dir {state}"
    return (
        f"no mesh up runs here with {where}: if `mesh up` started this broker, run this command as the same user "
        f"with the same HOME (or {STATE_DIR_ENV}) as it; for a broker mesh up did not start, give the component a "
        "user of its own with `mesh broker-config FILE... --out DIR` and point MESH_BROKER_PASSWORD_FILE at "
        "DIR/credentials, or give the broker's own user in the URL (--broker mqtt://user:password@host:port)"
    )


def _authorization(exc: TransportError) -> bool:
    if isinstance(exc, ConnectError):
        return exc.reason_code in _REFUSED_IDENTITY
    if isinstance(exc, SubscribeError):
        return "not authorized" in exc.reason.lower()
    return isinstance(exc, NotAuthorizedError)
