"""``mesh acp AGENT``: editors reach mesh agents over ACP (the Agent Client Protocol) on stdio.

:class:`~gateways.acp.server.AcpGateway` serves the ACP methods through E2A envelopes and the
gateway runtime; :mod:`gateways.acp.command` is the command. Needs the ``acp`` extra
(``pip install 'mqtt-agent-mesh[acp]'``).
"""
