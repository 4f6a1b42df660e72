"""Remote HTTP A2A agents as mesh agents: a ``remote:`` entry, served by a proxy on the a2a-sdk client.

See :mod:`agents.remote.agent` (the proxy), :mod:`agents.remote.config` (the entry),
:mod:`agents.remote.http` (auth, TLS, redirects, errors) and :mod:`agents.remote.health`.
"""

from agents.remote.config import RemoteAuth, RemoteConfig, RemoteTls

__all__ = ["RemoteAuth", "RemoteConfig", "RemoteTls"]
